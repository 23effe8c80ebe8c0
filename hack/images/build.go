package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The unprivileged user of distroless's nonroot images, which deploy/ and the
// chart set as runAsUser too.
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
	imageUser   = "65532:65532"
)

// The OCI labels every image carries (config labels; the same keys as
// annotations on its manifest and on the index). verify requires them.
var requiredLabels = []string{
	"org.opencontainers.image.title",
	"org.opencontainers.image.description",
	"org.opencontainers.image.source",
	"org.opencontainers.image.version",
	"org.opencontainers.image.revision",
	"org.opencontainers.image.licenses",
	"org.opencontainers.image.created",
}

const refNameAnnotation = "org.opencontainers.image.ref.name"

// The files of the base layer: what a static Go binary running as nonroot
// needs and nothing more (no shell, no package manager, no CA bundle: both
// binaries talk only to the API server, whose CA comes with the
// ServiceAccount token).
var (
	etcPasswd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		fmt.Sprintf("%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", nonrootName, nonrootUID, nonrootUID, nonrootName, nonrootName)
	etcGroup = "root:x:0:\n" + fmt.Sprintf("%s:x:%d:\n", nonrootName, nonrootUID)
)

type platformBinary struct {
	Platform v1.Platform
	Path     string
}

type buildOptions struct {
	Name     string
	Out      string
	Tag      string
	Created  time.Time
	Binaries []platformBinary
	Labels   map[string]string
}

func parsePlatform(s string) (v1.Platform, error) {
	os, arch, ok := strings.Cut(s, "/")
	if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
		return v1.Platform{}, fmt.Errorf("%q is not OS/ARCH", s)
	}
	return v1.Platform{OS: os, Architecture: arch}, nil
}

func platformString(p v1.Platform) string { return p.OS + "/" + p.Architecture }

// elfMachines are the architectures an image may be built for, with the ELF
// machine their binaries must declare.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// checkStaticBinary refuses a binary that is not a static Linux ELF
// executable for arch: it would not start in an image without a libc.
func checkStaticBinary(data []byte, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("architecture %q is not supported (amd64, arm64)", arch)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an ELF file: %w", err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("an ELF binary for %s, not %s (%s)", f.Machine, want, arch)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ELF type %s is not an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (it names an interpreter): build it with CGO_ENABLED=0")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("reading its dynamic section: %w", err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %v: build it with CGO_ENABLED=0", libs)
	}
	return nil
}

// tarEntry is one file or directory of a layer.
type tarEntry struct {
	name string // without a leading slash
	dir  bool
	mode int64
	uid  int
	data []byte
}

// layerTar writes the entries as an uncompressed tar, every time stamp set to
// t so that equal inputs give equal layers.
func layerTar(entries []tarEntry, t time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: t,
			Format:  tar.FormatPAX,
		}
		switch e.uid {
		case 0:
			h.Uname, h.Gname = "root", "root"
		case nonrootUID:
			h.Uname, h.Gname = nonrootName, nonrootName
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func baseEntries() []tarEntry {
	return []tarEntry{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(etcGroup)},
		{name: "etc/passwd", mode: 0o644, data: []byte(etcPasswd)},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/" + nonrootName, dir: true, mode: 0o700, uid: nonrootUID},
		{name: "tmp", dir: true, mode: 0o1777},
	}
}

func layerOf(entries []tarEntry, t time.Time) (v1.Layer, error) {
	data, err := layerTar(entries, t)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// platformImage is the image of one platform: the base layer, the binary
// layer, and a config that runs the binary as nonroot.
func platformImage(o buildOptions, pb platformBinary) (v1.Image, error) {
	bin, err := os.ReadFile(pb.Path)
	if err != nil {
		return nil, err
	}
	if pb.Platform.OS != "linux" {
		return nil, fmt.Errorf("%s: only linux images are built", platformString(pb.Platform))
	}
	if err := checkStaticBinary(bin, pb.Platform.Architecture); err != nil {
		return nil, fmt.Errorf("%s for %s: %w", pb.Path, platformString(pb.Platform), err)
	}
	base, err := layerOf(baseEntries(), o.Created)
	if err != nil {
		return nil, err
	}
	binLayer, err := layerOf([]tarEntry{{name: o.Name, mode: 0o755, data: bin}}, o.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "hack/images: /etc/passwd and /etc/group with nonroot (65532), /home/nonroot, /tmp",
		}},
		mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: fmt.Sprintf("hack/images: /%s, a static binary (CGO_ENABLED=0)", o.Name),
		}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = pb.Platform.OS
	cf.Architecture = pb.Platform.Architecture
	cf.Created = created
	cf.Config.User = imageUser
	cf.Config.Entrypoint = []string{"/" + o.Name}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = copyMap(o.Labels)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, copyMap(o.Labels)).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the image manifest")
	}
	return annotated, nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (o buildOptions) check() error {
	var errs []error
	if o.Name == "" || strings.ContainsAny(o.Name, "/ ") {
		errs = append(errs, fmt.Errorf("-name %q: want a plain file name", o.Name))
	}
	if o.Out == "" {
		errs = append(errs, errors.New("-out is required"))
	}
	if o.Tag == "" {
		errs = append(errs, errors.New("-tag is required"))
	}
	if len(o.Binaries) == 0 {
		errs = append(errs, errors.New("at least one -binary is required"))
	}
	for _, k := range requiredLabels {
		if o.Labels[k] == "" {
			errs = append(errs, fmt.Errorf("label %s is required", k))
		}
	}
	if t := o.Labels["org.opencontainers.image.title"]; t != "" && t != o.Name {
		errs = append(errs, fmt.Errorf("label org.opencontainers.image.title is %q, not the name %q", t, o.Name))
	}
	return errors.Join(errs...)
}

// build writes the multi-platform image of o.Binaries to o.Out and returns
// the digest of its index. Equal inputs give an equal digest.
func build(o buildOptions) (v1.Hash, error) {
	if err := o.check(); err != nil {
		return v1.Hash{}, err
	}
	sort.Slice(o.Binaries, func(i, j int) bool {
		return platformString(o.Binaries[i].Platform) < platformString(o.Binaries[j].Platform)
	})
	adds := make([]mutate.IndexAddendum, 0, len(o.Binaries))
	for _, pb := range o.Binaries {
		img, err := platformImage(o, pb)
		if err != nil {
			return v1.Hash{}, err
		}
		p := pb.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	idx, ok := mutate.Annotations(idx, copyMap(o.Labels)).(v1.ImageIndex)
	if !ok {
		return v1.Hash{}, errors.New("annotating the image index")
	}
	if err := writeLayoutTar(idx, o.Tag, o.Out, o.Created); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// writeLayoutTar writes idx as the one index of an OCI image layout, tagged
// tag, in the tar file out.
func writeLayoutTar(idx v1.ImageIndex, tag, out string, t time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
		return err
	}
	return writeDirTar(dir, out, t)
}
