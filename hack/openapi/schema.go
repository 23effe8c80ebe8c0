package main

import (
	"archive/zip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// specDir is where the k8s.io/kubernetes module holds the OpenAPI v3
// documents the API server serves, one per group version.
const specDir = "api/openapi-spec/v3/"

// maxSpecFile bounds what is read of one document (the largest, core v1, is
// about 2 MB).
const maxSpecFile = 64 << 20

// schema is the part of an OpenAPI v3 schema object the checks read.
type schema struct {
	Ref                  string             `json:"$ref"`
	AllOf                []*schema          `json:"allOf"`
	OneOf                []*schema          `json:"oneOf"`
	AnyOf                []*schema          `json:"anyOf"`
	Type                 string             `json:"type"`
	Format               string             `json:"format"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	Required             []string           `json:"required"`
	Enum                 []any              `json:"enum"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string"`
	ListType             string             `json:"x-kubernetes-list-type"`
	ListMapKeys          []string           `json:"x-kubernetes-list-map-keys"`
	GVK                  []gvk              `json:"x-kubernetes-group-version-kind"`

	additional *schema // AdditionalProperties when it is a schema
	anyKey     bool    // AdditionalProperties: true
}

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

func (g gvk) apiVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

type document struct {
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

// Spec is the OpenAPI of one Kubernetes version: the schema of every kind
// it serves, by apiVersion and kind, and the API groups it knows.
type Spec struct {
	Version string
	kinds   map[string]*kindSchema // "apiVersion kind"
	groups  map[string]bool
}

type kindSchema struct {
	root    *schema
	schemas map[string]*schema // the document's components, for $ref
}

var refPrefix = "#/components/schemas/"

// LoadSpec reads the OpenAPI v3 documents of one k8s.io/kubernetes module
// zip (as the Go module proxy serves it).
func LoadSpec(version, zipPath string) (*Spec, error) {
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s := &Spec{Version: version, kinds: map[string]*kindSchema{}, groups: map[string]bool{}}
	found := 0
	for _, f := range r.File {
		name := f.Name
		i := strings.Index(name, "/"+specDir)
		if i < 0 || !strings.HasSuffix(name, "_openapi.json") || strings.Contains(name[i+1+len(specDir):], "/") {
			continue
		}
		if f.UncompressedSize64 > maxSpecFile {
			return nil, fmt.Errorf("%s: %d bytes, more than %d", name, f.UncompressedSize64, maxSpecFile)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxSpecFile))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := s.add(data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		found++
	}
	if found == 0 || len(s.kinds) == 0 {
		return nil, fmt.Errorf("%s: no OpenAPI v3 documents under %s", zipPath, specDir)
	}
	return s, nil
}

func (s *Spec) add(data []byte) error {
	var doc document
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	for _, sc := range doc.Components.Schemas {
		if err := prepare(sc); err != nil {
			return err
		}
	}
	for _, sc := range doc.Components.Schemas {
		for _, g := range sc.GVK {
			s.groups[g.Group] = true
			// Only the documents of a group version serve its kinds
			// (others embed them, e.g. meta's WatchEvent everywhere).
			if _, ok := sc.Properties["apiVersion"]; !ok {
				continue
			}
			key := g.apiVersion() + " " + g.Kind
			if _, dup := s.kinds[key]; !dup {
				s.kinds[key] = &kindSchema{root: sc, schemas: doc.Components.Schemas}
			}
		}
	}
	return nil
}

// prepare decodes additionalProperties (a schema or a boolean) throughout.
func prepare(sc *schema) error {
	if sc == nil {
		return nil
	}
	if len(sc.AdditionalProperties) > 0 {
		switch string(sc.AdditionalProperties) {
		case "true":
			sc.anyKey = true
		case "false":
		default:
			sc.additional = &schema{}
			if err := json.Unmarshal(sc.AdditionalProperties, sc.additional); err != nil {
				return err
			}
		}
	}
	children := append(append(append([]*schema{sc.Items, sc.additional}, sc.AllOf...), sc.OneOf...), sc.AnyOf...)
	for _, p := range sc.Properties {
		children = append(children, p)
	}
	for _, c := range children {
		if err := prepare(c); err != nil {
			return err
		}
	}
	return nil
}

// Result of checking one object against one version.
type Result struct {
	Skipped string   // why the object was not checked
	Errors  []string // "field.path: what is wrong"
}

// Check validates obj (decoded JSON, numbers as json.Number) against the
// schema of its kind: unknown fields, required fields, types, enums, formats
// int-or-string and byte, and unique keys of map and set lists. A custom
// resource (a group the version does not know) is skipped; a kind of a
// built-in group the version does not serve is an error.
func (s *Spec) Check(obj map[string]any) Result {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return Result{Errors: []string{"apiVersion and kind are required"}}
	}
	k := s.kinds[apiVersion+" "+kind]
	if k == nil {
		group := ""
		if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
			group = apiVersion[:i]
		}
		if !s.groups[group] {
			return Result{Skipped: fmt.Sprintf("%s %s is not a Kubernetes %s API (a custom resource): not checked", apiVersion, kind, s.Version)}
		}
		return Result{Errors: []string{fmt.Sprintf("%s %s is not served by Kubernetes %s", apiVersion, kind, s.Version)}}
	}
	w := walker{schemas: k.schemas}
	w.value("", obj, k.root)
	sort.Strings(w.errs)
	return Result{Errors: w.errs}
}

type walker struct {
	schemas map[string]*schema
	errs    []string
	depth   int
}

// maxDepth bounds the walk (manifests nest a few dozen levels at most).
const maxDepth = 100

func (w *walker) fail(path, format string, args ...any) {
	if path == "" {
		path = "(object)"
	}
	w.errs = append(w.errs, path+": "+fmt.Sprintf(format, args...))
}

// resolve follows $ref, and allOf of one $ref (how v3 documents attach a
// default to a referenced schema).
func (w *walker) resolve(sc *schema) *schema {
	for i := 0; sc != nil && i < 32; i++ {
		switch {
		case sc.Ref != "":
			sc = w.schemas[strings.TrimPrefix(sc.Ref, refPrefix)]
		case len(sc.AllOf) == 1 && sc.Type == "" && sc.Properties == nil:
			sc = sc.AllOf[0]
		default:
			return sc
		}
	}
	return sc
}

func (w *walker) value(path string, v any, sc *schema) {
	sc = w.resolve(sc)
	if sc == nil || v == nil {
		// A missing reference accepts anything; null is an unset field.
		return
	}
	if w.depth++; w.depth > maxDepth {
		w.fail(path, "nested deeper than %d levels", maxDepth)
		w.depth--
		return
	}
	defer func() { w.depth-- }()
	for _, sub := range sc.AllOf {
		w.value(path, v, sub)
	}
	if len(sc.OneOf) > 0 || len(sc.AnyOf) > 0 {
		alternatives := append(append([]*schema{}, sc.OneOf...), sc.AnyOf...)
		if !w.anyMatches(path, v, alternatives) {
			w.fail(path, "%s matches none of the allowed types (%s)", describe(v), typeNames(w, alternatives))
		}
	}
	if len(sc.Enum) > 0 && !inEnum(v, sc.Enum) {
		w.fail(path, "%s is not one of %v", describe(v), sc.Enum)
	}
	typ := sc.Type
	if typ == "" && sc.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			w.fail(path, "%s, want an object", describe(v))
			return
		}
		w.object(path, m, sc)
	case "array":
		l, ok := v.([]any)
		if !ok {
			w.fail(path, "%s, want a list", describe(v))
			return
		}
		w.list(path, l, sc)
	case "string":
		if sc.IntOrString || sc.Format == "int-or-string" {
			if _, isNum := v.(json.Number); isNum {
				return
			}
		}
		str, ok := v.(string)
		if !ok {
			w.fail(path, "%s, want a string", describe(v))
			return
		}
		if sc.Format == "byte" {
			if _, err := base64.StdEncoding.DecodeString(str); err != nil {
				w.fail(path, "not base64 (format byte): %v", err)
			}
		}
	case "integer":
		n, ok := v.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			w.fail(path, "%s, want an integer", describe(v))
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			w.fail(path, "%s, want a number", describe(v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			w.fail(path, "%s, want a boolean", describe(v))
		}
	}
}

func (w *walker) object(path string, m map[string]any, sc *schema) {
	for _, r := range sc.Required {
		if _, ok := m[r]; !ok {
			w.fail(join(path, r), "required field missing")
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch p, known := sc.Properties[k]; {
		case known:
			w.value(join(path, k), m[k], p)
		case sc.additional != nil:
			w.value(join(path, k), m[k], sc.additional)
		case sc.anyKey || sc.PreserveUnknown || (sc.Properties == nil && len(sc.AllOf) == 0):
			// A map without a value schema, or free-form.
		case len(sc.AllOf) > 0 && w.knownInAllOf(k, sc.AllOf):
		default:
			w.fail(join(path, k), "unknown field")
		}
	}
}

func (w *walker) knownInAllOf(k string, all []*schema) bool {
	for _, s := range all {
		if r := w.resolve(s); r != nil {
			if _, ok := r.Properties[k]; ok {
				return true
			}
		}
	}
	return false
}

func (w *walker) list(path string, l []any, sc *schema) {
	seen := map[string]int{}
	for i, item := range l {
		p := fmt.Sprintf("%s[%d]", path, i)
		w.value(p, item, sc.Items)
		var key string
		switch sc.ListType {
		case "set":
			b, _ := json.Marshal(item)
			key = string(b)
		case "map":
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			parts := make([]any, 0, len(sc.ListMapKeys))
			for _, k := range sc.ListMapKeys {
				parts = append(parts, m[k])
			}
			b, _ := json.Marshal(parts)
			key = string(b)
		default:
			continue
		}
		if j, dup := seen[key]; dup {
			w.fail(p, "duplicate of item %d (x-kubernetes-list-type %s, keys %v)", j, sc.ListType, sc.ListMapKeys)
		}
		seen[key] = i
	}
}

// anyMatches tells whether v has the type of one of the alternatives.
func (w *walker) anyMatches(path string, v any, alts []*schema) bool {
	for _, a := range alts {
		sub := walker{schemas: w.schemas, depth: w.depth}
		sub.value(path, v, a)
		if len(sub.errs) == 0 {
			return true
		}
	}
	return false
}

func typeNames(w *walker, alts []*schema) string {
	var names []string
	for _, a := range alts {
		if r := w.resolve(a); r != nil && r.Type != "" {
			names = append(names, r.Type)
		}
	}
	return strings.Join(names, ", ")
}

func inEnum(v any, enum []any) bool {
	b, _ := json.Marshal(v)
	for _, e := range enum {
		if eb, _ := json.Marshal(e); string(eb) == string(b) {
			return true
		}
	}
	return false
}

var simpleKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func join(path, key string) string {
	if !simpleKey.MatchString(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(v any) string {
	switch t := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("string %q", t)
	case json.Number:
		return "number " + t.String()
	case bool:
		return fmt.Sprintf("boolean %t", t)
	default:
		return fmt.Sprintf("%T", v)
	}
}
