package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type verifyOptions struct {
	Name      string
	Platforms []v1.Platform
	Labels    map[string]string
}

// openIndex unpacks an OCI layout tar into a new temporary directory and
// returns the one image index it names, with its ref.name annotation. The
// caller removes the directory.
func openIndex(file string) (idx v1.ImageIndex, refName, dir string, err error) {
	dir, err = os.MkdirTemp("", "images-verify-")
	if err != nil {
		return nil, "", "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := extractTar(file, dir); err != nil {
		return nil, "", "", err
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", "", fmt.Errorf("not an OCI image layout: %w", err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, "", "", err
	}
	if len(im.Manifests) != 1 {
		return nil, "", "", fmt.Errorf("index.json names %d manifests, want one image index", len(im.Manifests))
	}
	d := im.Manifests[0]
	if d.MediaType != types.OCIImageIndex {
		return nil, "", "", fmt.Errorf("index.json names a %s, want an OCI image index", d.MediaType)
	}
	idx, err = top.ImageIndex(d.Digest)
	if err != nil {
		return nil, "", "", err
	}
	return idx, d.Annotations[refNameAnnotation], dir, nil
}

var revisionPattern = regexp.MustCompile(`^[0-9a-f]{40}(-dirty)?$`)

// verify checks an image tar as `make verify-images` does, and returns one
// line per platform checked. Every problem found is returned at once.
func verify(file string, o verifyOptions) ([]string, error) {
	if o.Name == "" {
		return nil, errors.New("-name is required")
	}
	idx, refName, dir, err := openIndex(file)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if refName == "" {
		fail("index.json: no %s annotation (the tag)", refNameAnnotation)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if im.MediaType != types.OCIImageIndex {
		fail("index: media type %q, want %q", im.MediaType, types.OCIImageIndex)
	}
	labels := checkLabels("index annotations", im.Annotations, o, fail)
	if !revisionPattern.MatchString(labels["org.opencontainers.image.revision"]) {
		fail("label org.opencontainers.image.revision %q is not a commit", labels["org.opencontainers.image.revision"])
	}

	want := map[string]bool{}
	for _, p := range o.Platforms {
		want[platformString(p)] = true
	}
	var report []string
	seen := map[string]bool{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			fail("index: manifest %s has no platform", d.Digest)
			continue
		}
		ps := platformString(*d.Platform)
		if seen[ps] {
			fail("index: %s twice", ps)
		}
		seen[ps] = true
		if !want[ps] {
			fail("index: platform %s is not expected", ps)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			fail("%s: %v", ps, err)
			continue
		}
		before := len(errs)
		checkImage(ps, img, d, o, labels, fail)
		if len(errs) == before {
			report = append(report, fmt.Sprintf("ok    %s %s %s: user %s, entrypoint /%s, static, labels", path.Base(file), refName, ps, imageUser, o.Name))
		}
	}
	for p := range want {
		if !seen[p] {
			fail("index: no image for %s", p)
		}
	}
	return report, errors.Join(errs...)
}

// checkLabels checks a set of labels or annotations: the required ones are
// not empty, the title is the name, those of o.Labels have their values.
func checkLabels(where string, got map[string]string, o verifyOptions, fail func(string, ...any)) map[string]string {
	for _, k := range requiredLabels {
		if got[k] == "" {
			fail("%s: %s is missing", where, k)
		}
	}
	if t := got["org.opencontainers.image.title"]; t != "" && t != o.Name {
		fail("%s: org.opencontainers.image.title is %q, want %q", where, t, o.Name)
	}
	keys := make([]string, 0, len(o.Labels))
	for k := range o.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != o.Labels[k] {
			fail("%s: %s is %q, want %q", where, k, got[k], o.Labels[k])
		}
	}
	return got
}

func checkImage(ps string, img v1.Image, d v1.Descriptor, o verifyOptions, indexLabels map[string]string, fail func(string, ...any)) {
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		fail("%s: manifest media type %q (%v), want %q", ps, mt, err, types.OCIManifestSchema1)
	}
	m, err := img.Manifest()
	if err != nil {
		fail("%s: %v", ps, err)
		return
	}
	if !reflect.DeepEqual(m.Annotations, indexLabels) {
		fail("%s: manifest annotations differ from the index's", ps)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		fail("%s: %v", ps, err)
		return
	}
	if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
		fail("%s: config says %s/%s", ps, cf.OS, cf.Architecture)
	}
	if cf.Config.User != imageUser {
		fail("%s: user %q, want %q (nonroot, numeric, so that runAsNonRoot can check it)", ps, cf.Config.User, imageUser)
	}
	entrypoint := "/" + o.Name
	if !reflect.DeepEqual(cf.Config.Entrypoint, []string{entrypoint}) || len(cf.Config.Cmd) != 0 {
		fail("%s: entrypoint %q cmd %q, want [%s] and no cmd", ps, cf.Config.Entrypoint, cf.Config.Cmd, entrypoint)
	}
	if !reflect.DeepEqual(cf.Config.Labels, indexLabels) {
		fail("%s: config labels %v differ from the index's annotations %v", ps, cf.Config.Labels, indexLabels)
	}
	checkFiles(ps, img, entrypoint, d.Platform.Architecture, fail)
}

// The whole file system of an image: anything else (a shell, a package
// manager, a library) fails the check.
var allowedDirs = map[string]bool{"etc": true, "home": true, "home/nonroot": true, "tmp": true}

func checkFiles(ps string, img v1.Image, entrypoint, arch string, fail func(string, ...any)) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail("%s: reading its file system: %v", ps, err)
			return
		}
		name := strings.TrimSuffix(path.Clean(strings.TrimPrefix(h.Name, "/")), "/")
		switch {
		case h.Typeflag == tar.TypeDir && allowedDirs[name]:
		case h.Typeflag == tar.TypeReg && (name == "etc/passwd" || name == "etc/group" || "/"+name == entrypoint):
			data, err := io.ReadAll(io.LimitReader(tr, maxArchiveBytes))
			if err != nil {
				fail("%s: reading %s: %v", ps, name, err)
				return
			}
			files[name] = data
			if "/"+name == entrypoint && (h.Mode&0o111 == 0 || h.Uid != 0 || h.Mode&0o022 != 0) {
				fail("%s: %s has mode %o owner %d, want executable, owned by root, not writable by others", ps, name, h.Mode, h.Uid)
			}
		default:
			fail("%s: unexpected %s (type %q) in the image", ps, h.Name, h.Typeflag)
		}
	}
	if !strings.Contains("\n"+string(files["etc/passwd"]), fmt.Sprintf("\n%s:x:%d:%d:", nonrootName, nonrootUID, nonrootUID)) {
		fail("%s: /etc/passwd has no %s entry with uid %d", ps, nonrootName, nonrootUID)
	}
	if !strings.Contains("\n"+string(files["etc/group"]), fmt.Sprintf("\n%s:x:%d:", nonrootName, nonrootUID)) {
		fail("%s: /etc/group has no %s entry with gid %d", ps, nonrootName, nonrootUID)
	}
	bin, ok := files[strings.TrimPrefix(entrypoint, "/")]
	if !ok {
		fail("%s: no %s", ps, entrypoint)
		return
	}
	if err := checkStaticBinary(bin, arch); err != nil {
		fail("%s: %s: %v", ps, entrypoint, err)
	}
}
