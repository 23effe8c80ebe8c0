package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// runRegistry serves go-containerregistry's in-memory registry on a free
// port of 127.0.0.1, writes host:port to -addr-file once it listens, and
// stops when ctx ends (SIGINT, SIGTERM).
func runRegistry(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrFile := fs.String("addr-file", "", "file to write host:port to once listening")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addrFile == "" || fs.NArg() != 0 {
		return errors.New("registry: want -addr-file FILE")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(stderr, "registry: ", log.LstdFlags))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	tmp := *addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
		ln.Close()
		return err
	}
	if err := os.Rename(tmp, *addrFile); err != nil {
		ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("registry: %w", err)
	case <-ctx.Done():
		// Shutdown waits for connections to go idle, and counts a connection
		// the client opened but never used as busy for its first 5 seconds
		// (a transport's spare dial does that). Past a short wait the rest
		// are closed: whoever stopped the registry is done with it.
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); errors.Is(err, context.DeadlineExceeded) {
			return srv.Close()
		} else if err != nil {
			return err
		}
		return nil
	}
}
