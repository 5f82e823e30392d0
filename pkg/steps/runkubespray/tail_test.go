package runkubespray

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFailureSummaryPicksAnsibleFailures(t *testing.T) {
	tb := &tailBuffer{max: 1 << 10}
	fmt.Fprintln(tb, "PLAY [all] ****")
	fmt.Fprintln(tb, "fatal: [w1]: UNREACHABLE! => {\"msg\": \"timeout\"}")
	fmt.Fprintln(tb, "PLAY RECAP ****")
	assert.Equal(t, `fatal: [w1]: UNREACHABLE! => {"msg": "timeout"}`, tb.failure())

	tb = &tailBuffer{max: 64}
	fmt.Fprint(tb, strings.Repeat("x", 500)+"\nlast words\n")
	assert.Contains(t, tb.failure(), "last words")
	assert.LessOrEqual(t, len(tb.buf), 64)

	assert.Equal(t, "it printed nothing", (&tailBuffer{max: 10}).failure())
}
