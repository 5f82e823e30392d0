package restoreetcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// etcd.env as kubespray's etcd.env.j2 writes it gives the restore its member's name, peer
// URL, cluster token and data folder; a file that lacks one, or names what the restore could
// not use safely, stops it before anything changes.
func TestParseEtcdEnv(t *testing.T) {
	env := `# Environment file for etcd 3.5.16
ETCD_DATA_DIR=/var/lib/etcd/
ETCD_ADVERTISE_CLIENT_URLS=https://10.0.0.1:2379
ETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.1:2380
ETCD_INITIAL_CLUSTER_STATE=existing
ETCD_INITIAL_CLUSTER_TOKEN=k8s_etcd
ETCD_NAME=etcd1
ETCD_INITIAL_CLUSTER=etcd1=https://10.0.0.1:2380,etcd2=https://10.0.0.2:2380,etcd3=https://10.0.0.3:2380
`
	e, err := parseEtcdEnv(env)
	require.NoError(t, err)
	assert.Equal(t, etcdEnv{DataDir: "/var/lib/etcd", Name: "etcd1", PeerURL: "https://10.0.0.1:2380", Token: "k8s_etcd"}, e)

	for name, bad := range map[string]string{
		"no name":       "ETCD_DATA_DIR=/var/lib/etcd\nETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.1:2380\n",
		"no data dir":   "ETCD_NAME=etcd1\nETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.1:2380\n",
		"root data dir": "ETCD_DATA_DIR=/\nETCD_NAME=etcd1\nETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.1:2380\n",
		"relative":      "ETCD_DATA_DIR=var/lib/etcd\nETCD_NAME=etcd1\nETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.1:2380\n",
		"two peer URLs": "ETCD_DATA_DIR=/var/lib/etcd\nETCD_NAME=etcd1\nETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.1:2380,https://10.0.1.1:2380\n",
		"commented":     "#ETCD_NAME=etcd1\nETCD_DATA_DIR=/var/lib/etcd\nETCD_INITIAL_ADVERTISE_PEER_URLS=https://10.0.0.1:2380\n",
	} {
		_, err := parseEtcdEnv(bad)
		assert.Error(t, err, name)
	}
	e, err = parseEtcdEnv("ETCD_DATA_DIR=/d\nETCD_NAME=n\nETCD_INITIAL_ADVERTISE_PEER_URLS=https://h:2380\n")
	require.NoError(t, err)
	assert.Equal(t, DefaultToken, e.Token, "kubespray's token when the file names none")
}
