package artifacts

import "time"

// FileSHA256 is exported to the tests, which check served files with it.
var FileSHA256 = fileSHA256

// Purge runs the purge of abandoned uploads as if it were now.
func (s *Server) Purge(now time.Time) { s.purge(now) }

// RaceHooks are called where two writers could interleave (see hooks.go): Contended when a
// writer is about to wait for a lock (a publishing lock, or "quota"), MetaWritten when a
// file's new metadata is in place but not the file, Published when both are, Admitted when
// an upload fits the quotas but its reservation is not yet on disk.
type RaceHooks struct {
	Contended, MetaWritten, Published, Admitted func(string)
}

// SetRaceHooks installs h; a nil function does nothing.
func (s *Server) SetRaceHooks(h RaceHooks) {
	or := func(f func(string)) func(string) {
		if f == nil {
			return nop
		}
		return f
	}
	s.testHooks.Store(&raceHooks{contended: or(h.Contended), metaWritten: or(h.MetaWritten), published: or(h.Published), admitted: or(h.Admitted)})
}

// NewestVersions reads a Packages index as the ArtifactIndex records it.
var NewestVersions = newestVersions

// TrackedHosts is the status endpoint's per-host view of tracked packages.
var TrackedHosts = trackedHosts
