package kubelet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podLogs are the log files of one pod's containers, one line per entry in the CRI format a
// real kubelet keeps ("<RFC3339Nano> <stdout|stderr> F <line>"), so each line keeps its time
// and stream for timestamps=, sinceTime= and stream= requests.
type podLogs struct {
	dir     string
	mu      sync.Mutex
	files   map[string]*os.File
	partial map[string][]byte // an unfinished line, by container and stream
	ended   map[string]bool   // containers whose log is complete
}

func newPodLogs(dir string) *podLogs {
	return &podLogs{dir: filepath.Join(dir, "logs"), files: map[string]*os.File{}, partial: map[string][]byte{}, ended: map[string]bool{}}
}

func (l *podLogs) path(container string) string { return filepath.Join(l.dir, container+".log") }

// Writer is a container's stdout or stderr: each complete line becomes one entry.
func (l *podLogs) Writer(container, stream string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		key := container + "/" + stream
		buf := slices.Concat(l.partial[key], p)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			if err := l.entry(container, stream, buf[:i]); err != nil {
				return 0, err
			}
			buf = buf[i+1:]
		}
		l.partial[key] = append([]byte(nil), buf...)
		return len(p), nil
	})
}

// Printf logs one stdout line of a container the stand-in only simulates (init, wait).
func (l *podLogs) Printf(container, format string, args ...any) {
	fmt.Fprintf(l.Writer(container, "stdout"), "simulated kubelet: "+format+"\n", args...)
}

// entry appends one line; the caller holds l.mu.
func (l *podLogs) entry(container, stream string, line []byte) error {
	f := l.files[container]
	if f == nil {
		if err := os.MkdirAll(l.dir, 0o755); err != nil {
			return err
		}
		var err error
		if f, err = os.OpenFile(l.path(container), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		l.files[container] = f
	}
	_, err := fmt.Fprintf(f, "%s %s F %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, line)
	return err
}

// End completes a container's log: an unfinished last line is kept, as a runtime does.
func (l *podLogs) End(container string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, stream := range []string{"stdout", "stderr"} {
		if p := l.partial[container+"/"+stream]; len(p) > 0 {
			_ = l.entry(container, stream, p)
		}
		delete(l.partial, container+"/"+stream)
	}
	if f := l.files[container]; f != nil {
		_ = f.Close()
		delete(l.files, container)
	}
	l.ended[container] = true
}

func (l *podLogs) isEnded(container string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended[container]
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// logEntry is one parsed line of a log file.
type logEntry struct {
	time   time.Time
	stream string
	line   string
}

func parseEntry(s string) (logEntry, bool) {
	parts := strings.SplitN(s, " ", 4)
	if len(parts) != 4 {
		return logEntry{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return logEntry{}, false
	}
	return logEntry{time: t, stream: parts[1], line: parts[3]}, true
}

// serve runs the kubelet API's containerLogs endpoint on 127.0.0.1, which the apiserver
// proxies pods/log to (kubectl logs, argo logs, the Argo UI). It returns the port.
func (k *Kubelet) serve() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.containerLogs)
	k.server = &http.Server{Handler: mux, TLSConfig: k.opts.TLSConfig, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = k.server.ServeTLS(ln, "", "") }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// containerLogs answers as pkg/kubelet/server does: the query is a v1.PodLogOptions
// (follow, tailLines, timestamps, sinceSeconds, sinceTime, limitBytes, stream).
func (k *Kubelet) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := logOptions(r.URL.Query())
	if err != nil {
		http.Error(w, "unable to decode query: "+err.Error(), http.StatusBadRequest)
		return
	}
	obj, exists, _ := k.store.GetByKey(ns + "/" + name)
	if !exists {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	pod := obj.(*corev1.Pod)
	if findContainer(pod.Spec.Containers, container) == nil && findContainer(pod.Spec.InitContainers, container) == nil {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	k.mu.Lock()
	logs := k.logs[name]
	k.mu.Unlock()
	if logs == nil {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", container, name), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if err := streamLog(r.Context(), w, logs, container, opts); err != nil {
		k.logf("logs of %s/%s: %v", name, container, err)
	}
}

// logOptions decodes the query the apiserver sends (pkg/registry/core/pod LogLocation);
// client-go's scheme has no url.Values conversion for PodLogOptions.
func logOptions(q url.Values) (*corev1.PodLogOptions, error) {
	opts := &corev1.PodLogOptions{Follow: q.Get("follow") == "true", Previous: q.Get("previous") == "true", Timestamps: q.Get("timestamps") == "true"}
	ints := map[string]**int64{"sinceSeconds": &opts.SinceSeconds, "tailLines": &opts.TailLines, "limitBytes": &opts.LimitBytes}
	for name, field := range ints {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s=%q: not a non-negative integer", name, v)
			}
			*field = &n
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, fmt.Errorf("sinceTime=%q: %v", v, err)
		}
		opts.SinceTime = &metav1.Time{Time: t}
	}
	if v := q.Get("stream"); v != "" {
		opts.Stream = (*string)(&v)
	}
	return opts, nil
}

// errLimit ends a stream at limitBytes.
var errLimit = fmt.Errorf("limitBytes reached")

// streamLog writes a container's log as asked, following it until the container has ended
// (or the client goes) when opts.Follow.
func streamLog(ctx context.Context, w http.ResponseWriter, logs *podLogs, container string, opts *corev1.PodLogOptions) error {
	var since time.Time
	switch {
	case opts.SinceTime != nil:
		since = opts.SinceTime.Time
	case opts.SinceSeconds != nil:
		since = time.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	}
	written := int64(0)
	emit := func(e logEntry) error {
		if e.time.Before(since) || (opts.Stream != nil && *opts.Stream != corev1.LogStreamAll && !strings.EqualFold(string(*opts.Stream), e.stream)) {
			return nil
		}
		out := e.line + "\n"
		if opts.Timestamps {
			out = e.time.Format(time.RFC3339Nano) + " " + out
		}
		if opts.LimitBytes != nil && written+int64(len(out)) >= *opts.LimitBytes {
			out = out[:*opts.LimitBytes-written]
			_, _ = io.WriteString(w, out)
			return errLimit
		}
		written += int64(len(out))
		_, err := io.WriteString(w, out)
		return err
	}
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}

	// Whatever is there now, cut to tailLines. The file is created if no line came yet: the
	// writer appends to the same file.
	ended := logs.isEnded(container)
	if err := os.MkdirAll(logs.dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(logs.path(container), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	rd := bufio.NewReader(f)
	var entries []logEntry
	pending := ""
	readAvailable := func(each func(logEntry) error) error {
		for {
			s, err := rd.ReadString('\n')
			pending += s
			if err != nil {
				return nil // EOF: an unfinished line stays pending
			}
			e, ok := parseEntry(strings.TrimSuffix(pending, "\n"))
			pending = ""
			if ok {
				if err := each(e); err != nil {
					return err
				}
			}
		}
	}
	_ = readAvailable(func(e logEntry) error { entries = append(entries, e); return nil })
	if opts.TailLines != nil && int64(len(entries)) > *opts.TailLines {
		entries = entries[int64(len(entries))-*opts.TailLines:]
	}
	for _, e := range entries {
		if err := emit(e); err != nil {
			return ignoreLimit(err)
		}
	}
	flush()
	for opts.Follow && !ended {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		ended = logs.isEnded(container) // before reading: nothing is written after End
		if err := readAvailable(emit); err != nil {
			return ignoreLimit(err)
		}
		flush()
	}
	return nil
}

func ignoreLimit(err error) error {
	if err == errLimit {
		return nil
	}
	return err
}

// registerNode creates (or takes over) the Node the stand-in stands for, with the kubelet
// API's address and port in its status: the apiserver finds containerLogs there.
func (k *Kubelet) registerNode(ctx context.Context, port int) error {
	nodes := k.kube.CoreV1().Nodes()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   k.opts.NodeName,
		Labels: map[string]string{corev1.LabelHostname: k.opts.NodeName, "bpa.akraino.org/simulated": "true"},
	}}
	cur, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, err = nodes.Get(ctx, node.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	cur.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: k.opts.NodeName}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "SIMULATED kubelet (test/framework/kubelet): pods run as local processes", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "simulated", OperatingSystem: "linux", Architecture: "amd64"},
	}
	_, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}

// bind assigns a pod to the stand-in's Node through pods/binding, as a scheduler does.
func (k *Kubelet) bind(ctx context.Context, pod *corev1.Pod) error {
	if pod.Spec.NodeName != "" {
		return nil
	}
	return k.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: k.opts.NodeName},
	}, metav1.CreateOptions{})
}
