// Command openapi-check validates Kubernetes objects in YAML files against
// the OpenAPI v3 schemas of one or more Kubernetes versions, as published in
// the k8s.io/kubernetes module (api/openapi-spec/v3): unknown fields,
// required fields, types, enums, formats and list keys, with the file, the
// object, the version and the field path of each error. Objects of custom
// resources (an API group the version does not have) are skipped with a
// message; a built-in kind a version does not serve is an error.
//
// Usage: openapi-check -spec VERSION=MODULE.zip [-spec ...] [-v] FILE.yaml...
//
// Prints one FAIL line per error (and, with -v, one ok or skip line per
// object and version), then a summary per version; exits 1 on any error.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxFile bounds what is read of one manifest file.
const maxFile = 16 << 20

type specFlags []string

func (s *specFlags) String() string     { return strings.Join(*s, ",") }
func (s *specFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var specs specFlags
	flag.Var(&specs, "spec", "VERSION=PATH of a k8s.io/kubernetes module zip (repeatable)")
	verbose := flag.Bool("v", false, "print a line for every object checked or skipped")
	flag.Parse()
	if len(specs) == 0 || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: openapi-check -spec VERSION=MODULE.zip [-spec ...] [-v] FILE.yaml...")
		os.Exit(2)
	}
	if !run(os.Stdout, specs, flag.Args(), *verbose) {
		os.Exit(1)
	}
}

// run checks every object of files against every spec; false on any error.
func run(out io.Writer, specs, files []string, verbose bool) bool {
	ok := true
	var loaded []*Spec
	for _, s := range specs {
		version, zipPath, found := strings.Cut(s, "=")
		if !found {
			fmt.Fprintf(out, "FAIL  -spec %q: want VERSION=PATH\n", s)
			return false
		}
		spec, err := LoadSpec(version, zipPath)
		if err != nil {
			fmt.Fprintf(out, "FAIL  Kubernetes %s: %v\n", version, err)
			return false
		}
		loaded = append(loaded, spec)
	}
	type object struct {
		file string
		obj  map[string]any
	}
	var objects []object
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			fmt.Fprintf(out, "FAIL  %s: %v\n", f, err)
			ok = false
			continue
		}
		for _, o := range objs {
			objects = append(objects, object{f, o})
		}
	}
	for _, spec := range loaded {
		checked, skipped, failed := 0, 0, 0
		for _, o := range objects {
			res := spec.Check(o.obj)
			name := fmt.Sprintf("%s %s", o.file, identity(o.obj))
			switch {
			case res.Skipped != "":
				skipped++
				if verbose {
					fmt.Fprintf(out, "skip  %s: %s\n", name, res.Skipped)
				}
			case len(res.Errors) > 0:
				failed++
				ok = false
				for _, e := range res.Errors {
					fmt.Fprintf(out, "FAIL  %s (Kubernetes %s): %s\n", name, spec.Version, e)
				}
			default:
				checked++
				if verbose {
					fmt.Fprintf(out, "ok    %s: valid in Kubernetes %s\n", name, spec.Version)
				}
			}
		}
		fmt.Fprintf(out, "Kubernetes %s: %d objects valid, %d invalid, %d custom resources not checked\n",
			spec.Version, checked, failed, skipped)
	}
	return ok
}

func identity(o map[string]any) string {
	kind, _ := o["kind"].(string)
	md, _ := o["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	return kind + "/" + name
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// readObjects returns the non-empty YAML documents of file, each an object.
func readObjects(file string) ([]map[string]any, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("larger than %d bytes", maxFile)
	}
	var objs []map[string]any
	for i, doc := range separator.Split(string(data), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if string(j) == "null" {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("document %d is not an object", i)
		}
		objs = append(objs, m)
	}
	return objs, nil
}
