package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"

	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/boost"
)

// Limits reads, from informers, what the API server's admission allows the
// CPU of new pods in a namespace: the LimitRanges' max per container and per
// pod (through upstream VPA's LimitRange calculator, which the
// recommendation is capped with too), their maxLimitRequestRatio (which
// that calculator does not combine), and the ResourceQuotas. A CPU startup
// boost is kept within them (boost.Room).
type Limits struct {
	calculator  limitrange.LimitRangeCalculator
	limitRanges corelisters.LimitRangeLister
	quotas      corelisters.ResourceQuotaLister
}

// NewLimits returns Limits over factory's LimitRange and ResourceQuota
// informers. Call it before starting factory.
func NewLimits(factory informers.SharedInformerFactory) (*Limits, error) {
	calculator, err := limitrange.NewLimitsRangeCalculator(factory)
	if err != nil {
		return nil, fmt.Errorf("creating the LimitRange calculator: %w", err)
	}
	return &Limits{
		calculator:  calculator,
		limitRanges: factory.Core().V1().LimitRanges().Lister(),
		quotas:      factory.Core().V1().ResourceQuotas().Lister(),
	}, nil
}

// admission returns what the admission of namespace checks of a new pod's
// CPU; the zero Admission when l is nil.
func (l *Limits) admission(namespace string) (boost.Admission, error) {
	var adm boost.Admission
	if l == nil {
		return adm, nil
	}
	container, err := l.calculator.GetContainerLimitRangeItem(namespace)
	if err != nil {
		return adm, fmt.Errorf("reading the LimitRanges of namespace %s: %w", namespace, err)
	}
	pod, err := l.calculator.GetPodLimitRangeItem(namespace)
	if err != nil {
		return adm, fmt.Errorf("reading the LimitRanges of namespace %s: %w", namespace, err)
	}
	adm.ContainerMax, adm.PodMax = cpuOf(container), cpuOf(pod)
	ranges, err := l.limitRanges.LimitRanges(namespace).List(labels.Everything())
	if err != nil {
		return adm, fmt.Errorf("reading the LimitRanges of namespace %s: %w", namespace, err)
	}
	for _, lr := range ranges {
		for _, item := range lr.Spec.Limits {
			q, ok := item.MaxLimitRequestRatio[corev1.ResourceCPU]
			if !ok {
				continue
			}
			switch item.Type {
			case corev1.LimitTypeContainer:
				adm.ContainerRatio = lower(adm.ContainerRatio, q)
			case corev1.LimitTypePod:
				adm.PodRatio = lower(adm.PodRatio, q)
			}
		}
	}
	if adm.Quotas, err = l.quotas.ResourceQuotas(namespace).List(labels.Everything()); err != nil {
		return adm, fmt.Errorf("reading the ResourceQuotas of namespace %s: %w", namespace, err)
	}
	return adm, nil
}

// cpuOf returns the cpu max of a combined LimitRange item, nil if none.
func cpuOf(item *corev1.LimitRangeItem) *resource.Quantity {
	if item == nil {
		return nil
	}
	q, ok := item.Max[corev1.ResourceCPU]
	if !ok {
		return nil
	}
	return &q
}

// lower returns the lower of current (nil: none) and q.
func lower(current *resource.Quantity, q resource.Quantity) *resource.Quantity {
	if current != nil && current.Cmp(q) <= 0 {
		return current
	}
	return &q
}
