package artifacts

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadAptKey: a key bpa serve cannot sign with stops it at start, saying why.
func TestLoadAptKey(t *testing.T) {
	newKey := func() *openpgp.Entity {
		e, err := openpgp.NewEntity("t", "", "t@bpa.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
		require.NoError(t, err)
		return e
	}
	write := func(block string, serialize ...func(*bytes.Buffer) error) string {
		var b bytes.Buffer
		w, err := armor.Encode(&b, block, nil)
		require.NoError(t, err)
		for _, s := range serialize {
			var raw bytes.Buffer
			require.NoError(t, s(&raw))
			_, err = w.Write(raw.Bytes())
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		f := filepath.Join(t.TempDir(), "key.asc")
		require.NoError(t, os.WriteFile(f, b.Bytes(), 0o600))
		return f
	}
	private := func(e *openpgp.Entity) func(*bytes.Buffer) error {
		return func(b *bytes.Buffer) error { return e.SerializePrivateWithoutSigning(b, nil) }
	}
	good, locked := newKey(), newKey()
	require.NoError(t, locked.EncryptPrivateKeys([]byte("secret"), nil))
	for name, tc := range map[string]struct{ file, want string }{
		"a good key":     {write(openpgp.PrivateKeyType, private(good)), ""},
		"two keys":       {write(openpgp.PrivateKeyType, private(good), private(newKey())), "holds 2 keys, want one"},
		"a public key":   {write(openpgp.PublicKeyType, func(b *bytes.Buffer) error { return good.Serialize(b) }), "no private key able to sign"},
		"a passphrase":   {write(openpgp.PrivateKeyType, private(locked)), "protected by a passphrase"},
		"not a key file": {write("PGP MESSAGE"), "key.asc"},
	} {
		_, err := loadAptKey(tc.file)
		if tc.want == "" {
			assert.NoError(t, err, name)
		} else {
			assert.ErrorContains(t, err, tc.want, name)
		}
	}
}
