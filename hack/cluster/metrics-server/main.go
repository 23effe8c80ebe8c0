// metrics-server: upstream's metrics-server (sigs.k8s.io/metrics-server, the version in
// go.mod), run unchanged except for how it reaches the kubelets.
//
// Hollow kubelets listen on 127.0.0.1, each on its own port, but report the host's address
// as their InternalIP (a kubelet refuses a loopback node IP). metrics-server builds the
// kubelet URL from the Node's address and the port in its status; this binary starts a
// proxy on 127.0.0.1 that sends every request (plain HTTP, as hollow kubelets serve) or
// connection (CONNECT, for HTTPS) to 127.0.0.1 on the requested port, and names it in
// HTTP_PROXY and HTTPS_PROXY before metrics-server builds its transports. Requests to the API
// server (a loopback address) never go through a proxy; only the kubelet scrapes do.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"runtime"
	"strconv"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"

	"sigs.k8s.io/metrics-server/cmd/metrics-server/app"
)

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	if len(os.Getenv("GOMAXPROCS")) == 0 {
		runtime.GOMAXPROCS(runtime.NumCPU())
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		klog.Fatalf("loopback proxy: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(toLoopback), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	// Read once, when the first transport is built: set before anything else runs.
	_ = os.Setenv("HTTPS_PROXY", "http://"+l.Addr().String())
	_ = os.Setenv("HTTP_PROXY", "http://"+l.Addr().String())

	cmd := app.NewMetricsServerCommand(genericapiserver.SetupSignalHandler())
	if err := cmd.Execute(); err != nil {
		klog.Fatal(err)
	}
}

// loopbackForward sends a proxied plain-HTTP request to 127.0.0.1 on the port it names.
var loopbackForward = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
	_, port, _ := net.SplitHostPort(r.In.URL.Host)
	r.Out.URL.Scheme = "http"
	r.Out.URL.Host = net.JoinHostPort("127.0.0.1", port)
}}

// toLoopback serves proxy requests: CONNECT host:port by connecting to 127.0.0.1:port, and
// absolute-form plain-HTTP requests by forwarding them there, whatever the host.
func toLoopback(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if r.Method != http.MethodConnect {
		target = r.URL.Host
	}
	_, port, err := net.SplitHostPort(target)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n <= 0 || n > 65535 {
		http.Error(w, fmt.Sprintf("bad target %q", target), http.StatusBadRequest)
		return
	}
	if r.Method != http.MethodConnect {
		if r.URL.Scheme != "http" {
			http.Error(w, "want an absolute http URL or CONNECT", http.StatusBadRequest)
			return
		}
		loopbackForward.ServeHTTP(w, r)
		return
	}
	upstream, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 5*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = upstream.Close()
		http.Error(w, "no hijacking", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	client, buf, err := hj.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	go func() {
		if n := buf.Reader.Buffered(); n > 0 {
			b, _ := buf.Reader.Peek(n)
			_, _ = upstream.Write(b)
		}
		_, _ = io.Copy(upstream, client)
		_ = upstream.Close()
	}()
	_, _ = io.Copy(client, upstream)
	_ = client.Close()
}
