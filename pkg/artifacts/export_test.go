package artifacts

import "time"

// FileSHA256 is exported to the tests, which check served files with it.
var FileSHA256 = fileSHA256

// Purge runs the purge of abandoned uploads as if it were now.
func (s *Server) Purge(now time.Time) { s.purge(now) }

// PublishHooks are called where two writers of one path could interleave (see hooks.go):
// Contended when a writer is about to wait for a publishing lock, MetaWritten when a
// file's new metadata is in place but not the file, Published when both are.
type PublishHooks struct {
	Contended, MetaWritten, Published func(string)
}

// SetPublishHooks installs h; a nil function does nothing.
func (s *Server) SetPublishHooks(h PublishHooks) {
	or := func(f func(string)) func(string) {
		if f == nil {
			return nop
		}
		return f
	}
	s.testHooks.Store(&publishHooks{contended: or(h.Contended), metaWritten: or(h.MetaWritten), published: or(h.Published)})
}
