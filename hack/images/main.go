// Command images builds the vpa-inplace container images without a container
// engine, checks them, and pushes them (hack/images/build.sh and push.sh call
// it; `make images`, `make verify-images`, `make push`).
//
//	images build  -name NAME -out FILE.tar -tag TAG -created RFC3339
//	              -binary linux/amd64=PATH -binary linux/arm64=PATH
//	              [-label KEY=VALUE]...
//	images verify -name NAME [-platform linux/amd64,linux/arm64] [-label KEY=VALUE]... FILE.tar
//	images push   [-insecure] FILE.tar REGISTRY/REPOSITORY:TAG
//	images registry -addr-file FILE
//
// registry serves an in-memory registry on 127.0.0.1 until it is stopped,
// for testing push (hack/images/verify.sh) without a real one.
//
// An image is an OCI image index of one image per platform, each made from an
// empty base: a layer with the nonroot user's /etc/passwd and /etc/group
// entries, its home and /tmp, and a layer with the static binary. The index is
// written as an OCI image layout in a tar file, which `skopeo copy
// oci-archive:`, `podman load` and Docker 25 or later read as well.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "images:", err)
		}
		os.Exit(2)
	}
}

const usage = `usage:
  images build  -name NAME -out FILE.tar -tag TAG -created RFC3339 -binary OS/ARCH=PATH... [-label KEY=VALUE]...
  images verify -name NAME [-platform OS/ARCH,...] [-label KEY=VALUE]... FILE.tar
  images push   [-insecure] FILE.tar REGISTRY/REPOSITORY:TAG
  images registry -addr-file FILE`

// run is main without the process: the tests call it as the scripts do.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "build":
		return runBuild(args[1:], stdout, stderr)
	case "verify":
		return runVerify(args[1:], stdout, stderr)
	case "push":
		return runPush(ctx, args[1:], stdout, stderr)
	case "registry":
		return runRegistry(ctx, args[1:], stderr)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}

// keyValues is a repeatable KEY=VALUE flag.
type keyValues map[string]string

func (kv keyValues) String() string {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+kv[k])
	}
	return strings.Join(parts, ",")
}

func (kv keyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	if _, dup := kv[k]; dup {
		return fmt.Errorf("%q given twice", k)
	}
	kv[k] = v
	return nil
}

func runBuild(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o buildOptions
	binaries := keyValues{}
	o.Labels = keyValues{}
	var created string
	fs.StringVar(&o.Name, "name", "", "image name: the binary is /NAME, the entrypoint")
	fs.StringVar(&o.Out, "out", "", "the OCI layout tar file to write")
	fs.StringVar(&o.Tag, "tag", "", "the tag recorded in the layout (org.opencontainers.image.ref.name)")
	fs.StringVar(&created, "created", "", "creation time of the image, RFC 3339 (the commit's, for reproducible images)")
	fs.Var(binaries, "binary", "OS/ARCH=PATH of a static binary, once per platform")
	fs.Var(keyValues(o.Labels), "label", "KEY=VALUE of an OCI label (config label and manifest annotation)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("build: unexpected arguments %q", fs.Args())
	}
	if created == "" {
		return errors.New("build: -created is required")
	}
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("build: -created: %w", err)
	}
	o.Created = t
	for platform, path := range binaries {
		p, err := parsePlatform(platform)
		if err != nil {
			return fmt.Errorf("build: -binary: %w", err)
		}
		o.Binaries = append(o.Binaries, platformBinary{Platform: p, Path: path})
	}
	digest, err := build(o)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	fmt.Fprintf(stdout, "%s %s\n", o.Out, digest)
	return nil
}

func runVerify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o verifyOptions
	o.Labels = keyValues{}
	var platforms string
	fs.StringVar(&o.Name, "name", "", "image name: the entrypoint must be /NAME")
	fs.StringVar(&platforms, "platform", "linux/amd64,linux/arm64", "comma-separated OS/ARCH the index must hold, exactly")
	fs.Var(keyValues(o.Labels), "label", "KEY=VALUE a label must have (also checked: the required labels are not empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("verify: want one FILE.tar")
	}
	for _, s := range strings.Split(platforms, ",") {
		p, err := parsePlatform(s)
		if err != nil {
			return fmt.Errorf("verify: -platform: %w", err)
		}
		o.Platforms = append(o.Platforms, p)
	}
	report, err := verify(fs.Arg(0), o)
	if err != nil {
		return fmt.Errorf("verify %s: %w", fs.Arg(0), err)
	}
	for _, line := range report {
		fmt.Fprintln(stdout, line)
	}
	return nil
}

func runPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	insecure := fs.Bool("insecure", false, "talk plain HTTP to the registry (127.0.0.1 and localhost always do)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return errors.New("push: want FILE.tar and REGISTRY/REPOSITORY:TAG")
	}
	ref, digest, err := push(ctx, fs.Arg(0), fs.Arg(1), *insecure)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	fmt.Fprintf(stdout, "%s@%s\n", ref, digest)
	return nil
}
