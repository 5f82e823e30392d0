package artifacts

import "time"

// FileSHA256 is exported to the tests, which check served files with it.
var FileSHA256 = fileSHA256

// Purge runs the purge of abandoned uploads as if it were now.
func (s *Server) Purge(now time.Time) { s.purge(now) }

// NewestVersions reads a Packages index as the ArtifactIndex records it.
var NewestVersions = newestVersions

// TrackedHosts is the status endpoint's per-host view of tracked packages.
var TrackedHosts = trackedHosts
