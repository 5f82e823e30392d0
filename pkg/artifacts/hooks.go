package artifacts

import "sync"

// raceHooks are the points where two writers could interleave; a test sets them
// (export_test.go) to hold one writer there while another runs, so that what a lock
// prevents is shown every time instead of in one round of hundreds.
type raceHooks struct {
	contended   func(key string)  // a writer is about to wait for the lock of key
	metaWritten func(path string) // a file's new metadata is in place, the file not yet
	published   func(path string) // both are
	admitted    func(user string) // an upload fits the quotas, and its reservation is not yet written
}

func nop(string) {}

var noHooks = raceHooks{contended: nop, metaWritten: nop, published: nop, admitted: nop}

// hooks are the test's hooks, or ones that do nothing.
func (s *Server) hooks() *raceHooks {
	if h := s.testHooks.Load(); h != nil {
		return h
	}
	return &noHooks
}

// lockNoting locks m, telling hooks first when it has to wait for it.
func lockNoting(m *sync.Mutex, key string, hooks func() *raceHooks) {
	if !m.TryLock() {
		hooks().contended(key)
		m.Lock()
	}
}
