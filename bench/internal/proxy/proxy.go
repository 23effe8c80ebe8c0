// Package proxy is a reverse proxy in front of the Kubernetes API server that
// counts the requests passing through it by verb, resource and subresource.
//
// Each updater under test talks to its own proxy over plain HTTP on
// 127.0.0.1 without credentials; the proxy forwards every request to the
// API server over TLS with the credentials of the kubeconfig it was given
// (so the API server sees the updater's own identity and RBAC). Watches are
// streamed through unbuffered.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Key identifies a kind of request: "patch pods/resize", "watch pods",
// "create events", "get discovery".
type Key struct {
	Verb        string
	Resource    string
	Subresource string
}

func (k Key) String() string {
	r := k.Resource
	if k.Subresource != "" {
		r += "/" + k.Subresource
	}
	return k.Verb + " " + r
}

// IsWrite reports whether the request changes state on the server.
func (k Key) IsWrite() bool {
	switch k.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Counts maps request kinds to how many were made.
type Counts map[Key]int

// Sub returns c minus before.
func (c Counts) Sub(before Counts) Counts {
	out := Counts{}
	for k, v := range c {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Add returns c plus other.
func (c Counts) Add(other Counts) Counts {
	out := Counts{}
	for k, v := range c {
		out[k] += v
	}
	for k, v := range other {
		out[k] += v
	}
	return out
}

// Total is the number of requests.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Writes is the number of write requests whose key passes keep (nil: all).
func (c Counts) Writes(keep func(Key) bool) int {
	n := 0
	for k, v := range c {
		if k.IsWrite() && (keep == nil || keep(k)) {
			n += v
		}
	}
	return n
}

// String lists the counts, largest first: "patch pods/resize=1000, ...".
func (c Counts) String() string {
	keys := make([]Key, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i].String() < keys[j].String()
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Proxy is a counting reverse proxy listening on 127.0.0.1.
type Proxy struct {
	server *http.Server
	ln     net.Listener
	done   chan error

	mu     sync.Mutex
	counts Counts
	stats  map[Key]*Latency
}

// Latency sums up the responses to one kind of request (watches apart).
type Latency struct {
	Count int
	Total time.Duration
	Max   time.Duration
	// Failed counts responses with a status of 400 or more, by status.
	Failed map[int]int
}

// Start listens on a free port of 127.0.0.1 and forwards to the API server
// of config, authenticating as config does.
func Start(ctx context.Context, config *rest.Config) (*Proxy, error) {
	target, err := url.Parse(config.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing API server URL %q: %w", config.Host, err)
	}
	if target.Path != "" && target.Path != "/" {
		return nil, fmt.Errorf("API server URL %q has a path; not supported", config.Host)
	}
	transport, err := rest.TransportFor(config)
	if err != nil {
		return nil, fmt.Errorf("building the API server transport: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	p := &Proxy{ln: ln, done: make(chan error, 1), counts: Counts{}, stats: map[Key]*Latency{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: transport,
		// Watches are streams: flush every event at once.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := Classify(r)
			p.count(key)
			if key.Verb == "watch" {
				rp.ServeHTTP(w, r)
				return
			}
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			rp.ServeHTTP(sw, r)
			p.observe(key, time.Since(start), sw.status)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { p.done <- p.server.Serve(ln) }()
	return p, nil
}

// URL is where clients reach the proxy.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Snapshot returns the counts so far.
func (p *Proxy) Snapshot() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(Counts, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Seen reports whether at least one request of kind k went through.
func (p *Proxy) Seen(k Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[k] > 0
}

// Close stops the proxy and cuts every open connection (watches included).
func (p *Proxy) Close() error {
	err := p.server.Close()
	if serveErr := <-p.done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

// Latencies returns what was observed of the responses so far.
func (p *Proxy) Latencies() map[Key]Latency {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Key]Latency, len(p.stats))
	for k, v := range p.stats {
		l := *v
		l.Failed = make(map[int]int, len(v.Failed))
		for c, n := range v.Failed {
			l.Failed[c] = n
		}
		out[k] = l
	}
	return out
}

func (p *Proxy) observe(k Key, d time.Duration, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.stats[k]
	if l == nil {
		l = &Latency{Failed: map[int]int{}}
		p.stats[k] = l
	}
	l.Count++
	l.Total += d
	l.Max = max(l.Max, d)
	if status >= 400 {
		l.Failed[status]++
	}
}

// statusWriter remembers the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer (Flush).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (p *Proxy) count(k Key) {
	p.mu.Lock()
	p.counts[k]++
	p.mu.Unlock()
}

// Classify names a Kubernetes API request the way the API server's
// request info does: verb (get, list, watch, create, update, patch, delete,
// deletecollection), resource and subresource. Anything outside
// /api/v1 and /apis/<group>/<version> is "get discovery" or "<verb> other".
func Classify(r *http.Request) Key {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		if r.Method == http.MethodGet {
			return Key{Verb: "get", Resource: "discovery"}
		}
		return Key{Verb: strings.ToLower(r.Method), Resource: "other"}
	}
	if len(rest) >= 3 && rest[0] == "namespaces" && !(len(rest) == 3 && (rest[2] == "status" || rest[2] == "finalize")) {
		// /namespaces/<ns>/<resource>/...; /namespaces/<name>[/status] is
		// the namespace object itself.
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return Key{Verb: "get", Resource: "discovery"}
	}
	key := Key{Resource: rest[0]}
	named := len(rest) >= 2
	if len(rest) >= 3 {
		key.Subresource = rest[2]
	}
	q := r.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch:
			key.Verb = "watch"
		case named:
			key.Verb = "get"
		default:
			key.Verb = "list"
		}
	case http.MethodPost:
		key.Verb = "create"
	case http.MethodPut:
		key.Verb = "update"
	case http.MethodPatch:
		key.Verb = "patch"
	case http.MethodDelete:
		if named {
			key.Verb = "delete"
		} else {
			key.Verb = "deletecollection"
		}
	default:
		key.Verb = strings.ToLower(r.Method)
	}
	return key
}
