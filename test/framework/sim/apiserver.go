package sim

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simcerts"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// EnvAPIServerRestart is how long a machine's kube-apiserver takes to serve again after its
// pod is removed (crictl rmp, as kubespray's k8s-certs-renew.sh does), a Go duration read
// from the test process's environment at each restart; empty: DefaultAPIServerRestart.
const EnvAPIServerRestart = "BPA_SIM_APISERVER_RESTART"

// DefaultAPIServerRestart is a few seconds, as a real kube-apiserver takes to start.
const DefaultAPIServerRestart = 3 * time.Second

// EnvKubeletStop is how long a machine's kubelet runs a static pod after its manifest left
// the manifests folder (a Go duration, read from the test process's environment); empty:
// DefaultKubeletStop. A real kubelet notices the removal (inotify, else its 20 s
// fileCheckFrequency) and then stops the pod's containers within their grace period, so a
// client that moves a manifest away must wait for the pod to stop (`crictl ps`).
const EnvKubeletStop = "BPA_SIM_KUBELET_STOP"

// DefaultKubeletStop is a few seconds: the kubelet's inotify and a container's SIGTERM.
const DefaultKubeletStop = 3 * time.Second

// ManifestsDir is the kubelet's static pod folder, where kubeadm writes the control plane's.
const ManifestsDir = "/etc/kubernetes/manifests"

// ControlPlanePods are kubeadm's static pods of the control plane, by component.
var ControlPlanePods = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// apiServerPod is a machine's kube-apiserver as a site's clients meet it. There is none on
// the machine: the site's application apiserver stands for every control-plane machine's.
// The machine fronts it in two ways:
//
//   - on its address, at the apiserver's port, passing bytes: clients see the application
//     apiserver's own TLS, so every kubeconfig the site makes (the rig's CA) works through
//     any machine, as a cluster's kubeconfig works through any control-plane node;
//   - on its own 127.0.0.1, at the same port, with TLS of its own: the machine's kubeadm
//     serving certificate (/etc/kubernetes/ssl/apiserver.crt and .key), loaded when the pod
//     starts, verified by the machine's ca.crt, and the HTTP relayed over TLS to the
//     application apiserver (a bearer token passes; a client certificate would not). Only
//     while the machine has kubeadm's kube-apiserver manifest. A client there sees which
//     certificate the machine's apiserver loaded: a renewal's is served only after a restart.
//
// Removing its pod (crictl rmp, Pod) stops both for EnvAPIServerRestart: the listeners
// close, open connections drop, and then it serves again, with the certificate files as
// they are then.
type apiServerPod struct {
	h      *simhost.Host
	port   int
	app    string // the application apiserver's host:port, dialled from the machine
	appTLS *tls.Config

	mu        sync.Mutex
	down      bool
	listeners []net.Listener
	conns     map[net.Conn]bool
	cert      *tls.Certificate // loaded at the pod's start (the first handshake after it)
	// gone is when each component's manifest was first seen missing (zero: it was there at
	// the last look; absent: never looked at), for the kubelet's delay in stopping the pod
	// (EnvKubeletStop).
	gone map[string]time.Time
}

// appPlanes holds every machine's apiServerPod by the application etcd they front the
// apiserver of, so an etcd host's unit can ask whether any of the cluster's API servers
// runs (runningAPIServers).
var appPlanes = struct {
	sync.Mutex
	pods map[*rig.AppEtcd][]*apiServerPod
}{pods: map[*rig.AppEtcd][]*apiServerPod{}}

// runningAPIServers names the machines fronting e's apiserver whose kube-apiserver pod runs.
func runningAPIServers(e *rig.AppEtcd) []string {
	appPlanes.Lock()
	pods := slices.Clone(appPlanes.pods[e])
	appPlanes.Unlock()
	var names []string
	for _, p := range pods {
		if p.running("kube-apiserver") {
			names = append(names, p.h.Name)
		}
	}
	return names
}

// serveAppAPIServer makes machine h front app (apiServerPod) and gives it kubeadm's static
// control-plane pods for its crictl.
func serveAppAPIServer(h *simhost.Host, app *rig.AppAPIServer) error {
	u, err := url.Parse(app.URL)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(app.CAData) {
		return errors.New("the application apiserver's CA holds no certificate")
	}
	p := &apiServerPod{h: h, port: app.Port, app: u.Host, conns: map[net.Conn]bool{}, gone: map[string]time.Time{},
		appTLS: &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}}
	p.mu.Lock()
	err = p.listen()
	p.mu.Unlock()
	if err != nil {
		return err
	}
	for _, c := range ControlPlanePods {
		removed := func() {}
		if c == "kube-apiserver" {
			removed = p.restart
		}
		h.AddPod(simhost.Pod{Namespace: "kube-system", Name: c + "-" + h.Name, Container: c,
			Running: func() bool { return p.running(c) }, Removed: removed})
	}
	appPlanes.Lock()
	appPlanes.pods[app.Etcd] = append(appPlanes.pods[app.Etcd], p)
	appPlanes.Unlock()
	return nil
}

// running reports whether the machine's kubelet runs component's static pod: while the
// machine has its manifest, and for the kubelet's stop delay (EnvKubeletStop) after the
// manifest was first seen gone. The delay counts from that first look, not from the move,
// so it is never shorter than a real kubelet's; a manifest never seen counts as gone when
// the manifests folder last changed, if it is there.
func (p *apiServerPod) running(component string) bool {
	dir := p.h.File(ManifestsDir)
	_, err := os.Stat(path.Join(dir, component+".yaml"))
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.gone[component] = time.Time{}
		return true
	}
	since, seen := p.gone[component]
	switch {
	case !seen: // never seen running: the folder's last change may have been its removal
		fi, err := os.Stat(dir)
		if err != nil {
			return false
		}
		since = fi.ModTime()
	case since.IsZero(): // seen running: gone from now on
		since = time.Now()
	}
	p.gone[component] = since
	return time.Since(since) < durationFrom(EnvKubeletStop, DefaultKubeletStop)
}

// listen opens both fronts; p.mu is held.
func (p *apiServerPod) listen() error {
	port := strconv.Itoa(p.port)
	outer, err := p.h.Listen(net.JoinHostPort(p.h.IP, port))
	if err != nil {
		return err
	}
	inner, err := p.h.Listen(net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		outer.Close()
		return err
	}
	p.listeners = []net.Listener{outer, inner}
	go p.serve(outer, p.pass)
	go p.serve(inner, p.terminate)
	return nil
}

func (p *apiServerPod) serve(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		go func() {
			defer p.untrack(c)
			handle(c)
		}()
	}
}

// track records c, unless the pod is down.
func (p *apiServerPod) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *apiServerPod) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// pass relays in to the application apiserver, bytes as they are.
func (p *apiServerPod) pass(in net.Conn) {
	out, err := net.DialTimeout("tcp", p.app, 10*time.Second)
	if err != nil {
		return
	}
	p.relay(in, out)
}

// terminate serves TLS with the machine's certificate and relays the plain bytes over TLS to
// the application apiserver, while the machine has the kube-apiserver manifest.
func (p *apiServerPod) terminate(in net.Conn) {
	if !p.running("kube-apiserver") {
		return
	}
	s := tls.Server(in, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return p.certificate()
	}})
	if err := s.Handshake(); err != nil {
		return
	}
	out, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", p.app, p.appTLS)
	if err != nil {
		return
	}
	p.relay(s, out)
}

// certificate is the serving certificate the pod loaded when it started: the machine's
// kubeadm files, read at the first handshake after the start.
func (p *apiServerPod) certificate() (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cert == nil {
		dir := p.h.File(simcerts.CertDir)
		c, err := tls.LoadX509KeyPair(path.Join(dir, "apiserver.crt"), path.Join(dir, "apiserver.key"))
		if err != nil {
			return nil, err
		}
		p.cert = &c
	}
	return p.cert, nil
}

// relay copies both ways until either side ends; out is tracked so a restart drops it.
func (p *apiServerPod) relay(in, out net.Conn) {
	if !p.track(out) {
		out.Close()
		return
	}
	defer p.untrack(out)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		out.Close()
		close(done)
	}()
	_, _ = io.Copy(in, out)
	in.Close()
	<-done
}

// restart is the pod removed: both fronts stop, connections drop, and after
// EnvAPIServerRestart the pod serves again, loading the certificate files anew.
func (p *apiServerPod) restart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return
	}
	p.down, p.cert = true, nil
	for _, l := range p.listeners {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	go func() {
		time.Sleep(durationFrom(EnvAPIServerRestart, DefaultAPIServerRestart))
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.listen() == nil { // an error: the machine has stopped
			p.down = false
		}
	}()
}

// durationFrom is the Go duration in the test process's environment variable env, read
// each time (a test sets it for its own run), or def.
func durationFrom(env string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(env)); err == nil {
		return d
	}
	return def
}
