//go:build ignore

// Command strictdecode decodes every object of the YAML streams given as
// arguments strictly into the Kubernetes API types of the k8s.io/api version
// it is built with: an unknown or duplicate field, or a value of the wrong
// type, is an error. Kinds the client-go scheme does not know (CRDs,
// cert-manager and Prometheus Operator objects) are listed as not checked.
// hack/deploy/verify-manifests.sh builds it outside the repository, with the
// product's go.mod, from the module cache.
//
// Usage: strictdecode FILE...
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func main() {
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	failed := false
	for _, file := range os.Args[1:] {
		checked, skipped, err := decodeFile(decoder, file)
		if err != nil {
			fmt.Printf("FAIL  %s: %v\n", file, err)
			failed = true
			continue
		}
		fmt.Printf("ok    %s: %d objects decode strictly", file, checked)
		if len(skipped) > 0 {
			fmt.Printf(" (not checked, no built-in type: %v)", skipped)
		}
		fmt.Println()
	}
	if failed {
		os.Exit(1)
	}
}

func decodeFile(decoder runtime.Decoder, file string) (int, []string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, nil, err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	checked, skipped := 0, []string{}
	var errs []error
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return checked, skipped, err
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		if meta.Kind == "" {
			continue // an empty document
		}
		if _, _, err := decoder.Decode(doc, nil, nil); err != nil {
			if runtime.IsNotRegisteredError(err) {
				skipped = append(skipped, meta.APIVersion+"/"+meta.Kind)
				continue
			}
			errs = append(errs, fmt.Errorf("%s %s: %w", meta.Kind, meta.Metadata.Name, err))
			continue
		}
		checked++
	}
	return checked, skipped, errors.Join(errs...)
}
