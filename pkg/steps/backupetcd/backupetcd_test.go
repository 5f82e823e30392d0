package backupetcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A failure names the reason the controller stalls the CR with, and that nothing changed.
func TestFailureNamesTheReason(t *testing.T) {
	err := failed("on %s: %v", "m1", "boom")
	assert.Regexp(t, `^EtcdBackupFailed: on m1: boom; the operation after it did not start and nothing was changed$`, err.Error())
}
