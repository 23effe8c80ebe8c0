package selfcert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// webhookConfig is one named webhook configuration, mutating or
// validating, read from an informer that watches it alone.
type webhookConfig struct {
	name     string
	mutating bool
	store    cache.Store
}

func (c webhookConfig) kind() string {
	if c.mutating {
		return "MutatingWebhookConfiguration"
	}
	return "ValidatingWebhookConfiguration"
}

// bundles returns the name and caBundle of each webhook of the
// configuration; ok is false when it does not exist.
func (c webhookConfig) bundles() (names []string, bundles [][]byte, ok bool, err error) {
	obj, exists, err := c.store.GetByKey(c.name)
	if err != nil || !exists {
		return nil, nil, false, err
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			names, bundles = append(names, w.Name), append(bundles, w.ClientConfig.CABundle)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range o.Webhooks {
			names, bundles = append(names, w.Name), append(bundles, w.ClientConfig.CABundle)
		}
	default:
		return nil, nil, false, fmt.Errorf("%s %s: unexpected object %T", c.kind(), c.name, obj)
	}
	return names, bundles, true, nil
}

// published tells whether every webhook of every configuration that exists
// carries bundle. A configuration that does not exist calls nobody, so it
// holds nothing up.
func published(configs []webhookConfig, bundle []byte) bool {
	for _, c := range configs {
		_, bundles, ok, err := c.bundles()
		if err != nil {
			return false
		}
		if !ok {
			continue
		}
		for _, b := range bundles {
			if !bytes.Equal(b, bundle) {
				return false
			}
		}
	}
	return true
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// caBundlePatch returns the JSON patch that sets caBundle in the webhooks at
// the given indexes, each guarded by a test of the webhook's name, so that
// nothing else of the object is touched and a reordered list fails the
// patch instead of setting the wrong webhook.
func caBundlePatch(names []string, indexes []int, bundle []byte) ([]byte, error) {
	ops := make([]jsonPatchOp, 0, 2*len(indexes))
	for _, i := range indexes {
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: names[i]},
			// add replaces a member that exists, and creates one that does not.
			jsonPatchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: bundle},
		)
	}
	return json.Marshal(ops)
}

// patchCABundles patches, in every configuration that exists, the caBundle
// of each webhook that does not carry bundle yet. It never creates a
// configuration, and changes no other field.
func patchCABundles(ctx context.Context, client kubernetes.Interface, configs []webhookConfig, bundle []byte) error {
	logger := klog.FromContext(ctx)
	var errs []error
	for _, c := range configs {
		names, bundles, ok, err := c.bundles()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			logger.V(4).Info("Webhook configuration not found, nothing to patch", "kind", c.kind(), "name", c.name)
			continue
		}
		var stale []int
		for i, b := range bundles {
			if !bytes.Equal(b, bundle) {
				stale = append(stale, i)
			}
		}
		if len(stale) == 0 {
			continue
		}
		patch, err := caBundlePatch(names, stale, bundle)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c.mutating {
			_, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, c.name, types.JSONPatchType, patch, metav1PatchOptions)
		} else {
			_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, c.name, types.JSONPatchType, patch, metav1PatchOptions)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("patching the caBundle of %s %s: %w", c.kind(), c.name, err))
			continue
		}
		logger.Info("Patched caBundle", "kind", c.kind(), "name", c.name, "webhooks", len(stale))
	}
	return errors.Join(errs...)
}
