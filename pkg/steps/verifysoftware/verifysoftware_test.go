package verifysoftware

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummarise(t *testing.T) {
	ok := `[{"name":"m1","phase":"Succeeded","changed":true},"{\"name\":\"w1\",\"phase\":\"Succeeded\"}"]`
	s, err := Summarise([]byte(ok))
	require.NoError(t, err)
	assert.Equal(t, "2 hosts in the wanted state, 1 changed", s)

	bad := `[{"name":"m1","phase":"Succeeded"},{"name":"w2","phase":"Failed","message":"dial 10.0.0.2:22: timeout"},{}]`
	_, err = Summarise([]byte(bad))
	require.EqualError(t, err, "2 of 3 hosts failed: <unknown host>; w2 (dial 10.0.0.2:22: timeout)")

	_, err = Summarise([]byte(`not json`))
	require.Error(t, err)
}
