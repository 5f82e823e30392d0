package stepio

import "time"

// Restore is restore-etcd's output (RestoreFile): what it restored where, and where the
// data it replaced is kept.
type Restore struct {
	Snapshot string `json:"snapshot"`
	SHA256   string `json:"sha256"`
	// Revision is the canary's revision in the snapshot, which the restored etcd serves.
	Revision int64 `json:"revision"`
	// Member is the etcd member restored from the snapshot, as a cluster of one.
	Member string `json:"member"`
	// SetAside maps each member to the folder its data from before the restore was moved
	// to.
	SetAside   map[string]string `json:"setAside,omitempty"`
	RestoredAt time.Time         `json:"restoredAt"`
	Workflow   string            `json:"workflow,omitempty"`
}
