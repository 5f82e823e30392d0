package sshexec

import (
	"context"
	"fmt"
)

// Pool keeps one connection per host, for a step that acts on several hosts, some of them
// in several roles (a master that is an etcd member too): each is dialled once, the first
// time it is asked for, and all are closed together.
type Pool struct {
	cfg   Config
	conns map[string]*Client
	order []*Client
}

// NewPool is an empty pool that dials with cfg.
func NewPool(cfg Config) *Pool { return &Pool{cfg: cfg, conns: map[string]*Client{}} }

// Dial returns the connection to t, made the first time; its error names t.
func (p *Pool) Dial(ctx context.Context, t Target) (*Client, error) {
	if c := p.conns[t.Name]; c != nil {
		return c, nil
	}
	c, err := Dial(ctx, t.Addr, p.cfg)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %v", t.Name, t.Addr, err)
	}
	p.conns[t.Name] = c
	p.order = append(p.order, c)
	return c, nil
}

// Close closes every connection.
func (p *Pool) Close() {
	for _, c := range p.order {
		c.Close()
	}
}
