package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push uploads the image index of an OCI layout tar, with every platform's
// image, to ref (REGISTRY/REPOSITORY:TAG), with the credentials of the
// Docker config file (~/.docker/config.json, $DOCKER_CONFIG) and its
// credential helpers. It returns the reference and the index's digest, by
// which the image can be pinned.
func push(ctx context.Context, file, ref string, insecure bool) (name.Reference, v1.Hash, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, append(opts, name.StrictValidation)...)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	idx, _, dir, err := openIndex(file)
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("%s: %w", file, err)
	}
	defer os.RemoveAll(dir)
	digest, err := idx.Digest()
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if err := remote.WriteIndex(r, idx,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("vpa-inplace-images"),
	); err != nil {
		return nil, v1.Hash{}, fmt.Errorf("pushing %s to %s: %w", file, r, err)
	}
	return r, digest, nil
}
