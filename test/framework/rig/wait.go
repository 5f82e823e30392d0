package rig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// errAddrInUse marks a start that lost the race for a port freePort picked.
var errAddrInUse = errors.New("address already in use")

// freePort asks the kernel for a free loopback port. Another process may take
// it before ours binds it; retryPorts covers that window.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free loopback port: %v", err))
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// retryPorts runs start again (with new ports) when it lost a port race.
func retryPorts(start func() error) error {
	var err error
	for range 3 {
		if err = start(); !errors.Is(err, errAddrInUse) {
			return err
		}
	}
	return err
}

// waitFor polls ready until it succeeds, the process exits, or timeout.
func waitFor(ctx context.Context, p *Process, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if p.Exited() {
			err := fmt.Errorf("exited before ready (last check: %v)", last)
			if grepFile(p.logPath, "address already in use") {
				err = fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return p.failure(err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Errorf("not ready: %w (last check: %v)", ctx.Err(), last))
		case <-tick.C:
		}
	}
}

// httpGetOK GETs url (verifying TLS against caPEM when given, with a bearer
// token when given) and wants a 200.
func httpGetOK(ctx context.Context, caPEM []byte, url, token string) error {
	var tlsConfig *tls.Config
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tlsConfig = &tls.Config{RootCAs: pool}
	}
	return httpGet(ctx, tlsConfig, url, token)
}

// httpGet GETs url with tlsConfig (nil: Go's defaults), with a bearer token when given, and
// wants a 200.
func httpGet(ctx context.Context, tlsConfig *tls.Config, url, token string) error {
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConfig}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
