package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// writeDirTar writes the regular files and directories under dir into the
// tar file out (names relative to dir, sorted, every time stamp t, owner 0),
// through a temporary file renamed at the end.
func writeDirTar(dir, out string, t time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)

	tmp, err := os.CreateTemp(filepath.Dir(out), ".images-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, p := range names {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: t, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if info.IsDir() {
			h.Name += "/"
			h.Mode = 0o755
			h.Typeflag = tar.TypeDir
		} else {
			h.Size = info.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.IsDir() {
			if err := copyFile(tw, p); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// maxArchiveBytes bounds what extractTar writes: two static binaries of a
// few tens of MiB each, compressed, are far below it.
const maxArchiveBytes = 1 << 30

// extractTar unpacks an OCI layout tar into dir. Only regular files and
// directories with relative names inside dir are accepted, and at most
// maxArchiveBytes in all.
func extractTar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tar: %w", err)
		}
		name := path.Clean(h.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("entry %q leaves the layout", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxArchiveBytes {
				return fmt.Errorf("more than %d bytes", maxArchiveBytes)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, io.LimitReader(tr, h.Size))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %q is neither a file nor a directory", h.Name, h.Typeflag)
		}
	}
}
