package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A group version's document as the k8s.io/kubernetes module publishes it,
// cut down to what the checks read: a kind with a $ref'd spec (allOf with a
// default), required fields, an enum, a map of strings, int-or-string, a
// base64 field and a list keyed by name.
const widgetsV1 = `{
  "openapi": "3.0.0",
  "components": {"schemas": {
    "io.example.Widget": {
      "type": "object",
      "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"allOf": [{"$ref": "#/components/schemas/io.example.Meta"}], "default": {}},
        "spec": {"allOf": [{"$ref": "#/components/schemas/io.example.WidgetSpec"}], "default": {}}
      },
      "x-kubernetes-group-version-kind": [{"group": "example.io", "version": "v1", "kind": "Widget"}]
    },
    "io.example.Meta": {
      "type": "object",
      "properties": {
        "name": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}}
      }
    },
    "io.example.WidgetSpec": {
      "type": "object",
      "required": ["size"],
      "properties": {
        "size": {"type": "integer", "format": "int32"},
        "color": {"type": "string", "enum": ["red", "blue"]},
        "port": {"allOf": [{"$ref": "#/components/schemas/io.example.IntOrString"}]},
        "caBundle": {"type": "string", "format": "byte"},
        "enabled": {"type": "boolean"},
        "parts": {
          "type": "array",
          "items": {"allOf": [{"$ref": "#/components/schemas/io.example.Part"}], "default": {}},
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"]
        }
      }
    },
    "io.example.IntOrString": {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
    "io.example.Part": {
      "type": "object",
      "required": ["name"],
      "properties": {"name": {"type": "string"}, "weight": {"type": "number"}}
    }
  }}
}`

// specZip writes a module zip holding the documents (file name -> JSON) and
// returns its path.
func specZip(t *testing.T, version string, docs map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, doc := range docs {
		f, err := w.Create("k8s.io/kubernetes@" + version + "/" + specDir + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	// Files elsewhere in the module are ignored.
	if _, err := w.Create("k8s.io/kubernetes@" + version + "/api/openapi-spec/swagger.json"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), version+".zip")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const validWidget = `apiVersion: example.io/v1
kind: Widget
metadata:
  name: w
  labels: {app: w}
spec:
  size: 3
  color: red
  port: http
  caBundle: Cg==
  enabled: true
  parts:
    - name: a
      weight: 1.5
    - name: b
`

func TestCheck(t *testing.T) {
	spec, err := LoadSpec("v1.99.0", specZip(t, "v1.99.0", map[string]string{"apis__example.io__v1_openapi.json": widgetsV1}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		edit     func(string) string
		want     []string // errors, in order
		wantSkip string
	}{
		{name: "valid", edit: func(s string) string { return s }},
		{name: "int-or-string takes a number", edit: func(s string) string { return strings.Replace(s, "port: http", "port: 8080", 1) }},
		{name: "null is an unset field", edit: func(s string) string { return strings.Replace(s, "color: red", "color: null", 1) }},
		{
			name: "unknown field",
			edit: func(s string) string { return strings.Replace(s, "  size: 3\n", "  size: 3\n  colour: red\n", 1) },
			want: []string{"spec.colour: unknown field"},
		},
		{
			name: "unknown field in a list item behind a $ref",
			edit: func(s string) string {
				return strings.Replace(s, "    - name: b\n", "    - name: b\n      wieght: 2\n", 1)
			},
			want: []string{"spec.parts[1].wieght: unknown field"},
		},
		{
			name: "required field missing",
			edit: func(s string) string { return strings.Replace(s, "  size: 3\n", "", 1) },
			want: []string{"spec.size: required field missing"},
		},
		{
			name: "required field of a list item missing",
			edit: func(s string) string { return strings.Replace(s, "    - name: b\n", "    - weight: 2\n", 1) },
			want: []string{"spec.parts[1].name: required field missing"},
		},
		{
			name: "wrong types",
			edit: func(s string) string {
				s = strings.Replace(s, "size: 3", `size: "3"`, 1)
				s = strings.Replace(s, "enabled: true", `enabled: "yes"`, 1)
				return strings.Replace(s, "weight: 1.5", "weight: heavy", 1)
			},
			want: []string{
				`spec.enabled: string "yes", want a boolean`,
				`spec.parts[0].weight: string "heavy", want a number`,
				`spec.size: string "3", want an integer`,
			},
		},
		{
			name: "not an integer",
			edit: func(s string) string { return strings.Replace(s, "size: 3", "size: 3.5", 1) },
			want: []string{"spec.size: number 3.5, want an integer"},
		},
		{
			name: "enum",
			edit: func(s string) string { return strings.Replace(s, "color: red", "color: green", 1) },
			want: []string{`spec.color: string "green" is not one of [red blue]`},
		},
		{
			name: "map values are strings",
			edit: func(s string) string { return strings.Replace(s, "labels: {app: w}", "labels: {replicas: 2}", 1) },
			want: []string{"metadata.labels.replicas: number 2, want a string"},
		},
		{
			name: "int-or-string takes neither a list nor a boolean",
			edit: func(s string) string { return strings.Replace(s, "port: http", "port: true", 1) },
			want: []string{"spec.port: boolean true matches none of the allowed types (integer, string)"},
		},
		{
			name: "format byte",
			edit: func(s string) string { return strings.Replace(s, "caBundle: Cg==", "caBundle: __CA_BUNDLE__", 1) },
			want: []string{"spec.caBundle: not base64 (format byte): illegal base64 data at input byte 0"},
		},
		{
			name: "duplicate key of a map list",
			edit: func(s string) string { return strings.Replace(s, "    - name: b\n", "    - name: a\n", 1) },
			want: []string{"spec.parts[1]: duplicate of item 0 (x-kubernetes-list-type map, keys [name])"},
		},
		{
			name: "a version of a known group that is not served",
			edit: func(s string) string { return strings.Replace(s, "example.io/v1", "example.io/v2", 1) },
			want: []string{"example.io/v2 Widget is not served by Kubernetes v1.99.0"},
		},
		{
			name:     "custom resource",
			edit:     func(s string) string { return strings.Replace(s, "example.io/v1", "other.example/v1", 1) },
			wantSkip: "other.example/v1 Widget is not a Kubernetes v1.99.0 API (a custom resource): not checked",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "w.yaml")
			if err := os.WriteFile(file, []byte(tc.edit(validWidget)), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := readObjects(file)
			if err != nil || len(objs) != 1 {
				t.Fatalf("readObjects: %v, %d objects", err, len(objs))
			}
			res := spec.Check(objs[0])
			if res.Skipped != tc.wantSkip {
				t.Errorf("skipped %q, want %q", res.Skipped, tc.wantSkip)
			}
			if strings.Join(res.Errors, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(res.Errors, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestRunNamesFileObjectVersionAndPath: run's FAIL line names all four, and
// run fails; a valid file passes.
func TestRunNamesFileObjectVersionAndPath(t *testing.T) {
	zip := specZip(t, "v1.99.0", map[string]string{"apis__example.io__v1_openapi.json": widgetsV1})
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("---\n"+validWidget+"---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(validWidget, "  size: 3\n", "  size: 3\n  colour: red\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if !run(&out, []string{"v1.99.0=" + zip}, []string{good}, false) {
		t.Errorf("a valid file fails:\n%s", out.String())
	}
	out.Reset()
	if run(&out, []string{"v1.99.0=" + zip}, []string{good, bad}, false) {
		t.Errorf("an invalid file passes:\n%s", out.String())
	}
	want := "FAIL  " + bad + " Widget/w (Kubernetes v1.99.0): spec.colour: unknown field\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output:\n%s\nwant a line:\n%s", out.String(), want)
	}
}

func TestLoadSpecRefusesAZipWithoutDocuments(t *testing.T) {
	if _, err := LoadSpec("v1.99.0", specZip(t, "v1.99.0", nil)); err == nil {
		t.Error("a module zip without OpenAPI v3 documents loads")
	}
}

func TestReadObjectsRefusesWhatIsNotAnObject(t *testing.T) {
	file := filepath.Join(t.TempDir(), "list.yaml")
	if err := os.WriteFile(file, []byte("- a\n- b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readObjects(file); err == nil {
		t.Error("a YAML list is read as an object")
	}
}
