package recommendation

import (
	"fmt"
	"sync/atomic"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"
)

// NewClusterMemo returns the Memo both binaries use: recommendations capped
// to the namespaces' LimitRanges (upstream VPA's calculator, on factory's
// LimitRange informer) and kept within them (fit), computed once per VPA
// version, LimitRange version and pod shape. Every LimitRange event makes a new LimitRange version.
// serverMinor is the API server's minor version (0: unknown), whose
// LimitRanger checks a resize whole or only what it changes
// (Calculator.WithServerMinor); the admission controller, which sees pods
// created, passes 0. Call it before starting factory.
func NewClusterMemo(factory informers.SharedInformerFactory, serverMinor int) (*Memo, error) {
	limitRanges, err := limitrange.NewLimitsRangeCalculator(factory)
	if err != nil {
		return nil, fmt.Errorf("creating the LimitRange calculator: %w", err)
	}
	var version atomic.Uint64
	bump := func() { version.Add(1) }
	if _, err := factory.Core().V1().LimitRanges().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { bump() },
		UpdateFunc: func(any, any) { bump() },
		DeleteFunc: func(any) { bump() },
	}); err != nil {
		return nil, fmt.Errorf("watching LimitRanges: %w", err)
	}
	calc := NewCalculator(limitRanges).WithLimitRanges(factory.Core().V1().LimitRanges().Lister()).WithServerMinor(serverMinor)
	return NewMemo(calc, version.Load), nil
}
