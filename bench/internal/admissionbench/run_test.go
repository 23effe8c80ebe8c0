package admissionbench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Both handlers answer the review with the recommendation: the check the
// benchmark applies to every response.
func TestHandlersPatchTheRecommendation(t *testing.T) {
	for _, h := range Handlers {
		t.Run(h.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			handler, err := h.New(ctx, NewCluster(3))
			require.NoError(t, err)
			require.NoError(t, Check(serve(handler, h.Path, Review())))
		})
	}
}

// BenchmarkReview is one review per handler at 100 VPAs, for profiles:
// go test -bench Review -benchmem -memprofile mem.out ./internal/admissionbench/
func BenchmarkReview(b *testing.B) {
	for _, h := range Handlers {
		b.Run(h.Name, func(b *testing.B) {
			handler, err := h.New(b.Context(), NewCluster(100))
			require.NoError(b, err)
			body := Review()
			b.ReportAllocs()
			for b.Loop() {
				serve(handler, h.Path, body)
			}
		})
	}
}
