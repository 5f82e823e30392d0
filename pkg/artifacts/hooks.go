package artifacts

// publishHooks are the points where two writers of one path could interleave; a test sets
// them (export_test.go) to hold one writer there while another runs, so that what the
// publishing lock prevents is shown every time instead of in one round of hundreds.
type publishHooks struct {
	contended   func(key string)  // a writer is about to wait for the publishing lock of key
	metaWritten func(path string) // the new metadata is in place, the file not yet
	published   func(path string) // both are
}

func nop(string) {}

var noHooks = publishHooks{contended: nop, metaWritten: nop, published: nop}

// hooks are the test's hooks, or ones that do nothing.
func (s *Server) hooks() *publishHooks {
	if h := s.testHooks.Load(); h != nil {
		return h
	}
	return &noHooks
}
