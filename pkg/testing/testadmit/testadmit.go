// Package testadmit tells whether the API server would create a pod (or
// resize one: Resize), as far as its cpu and memory go: the checks of the
// LimitRanger admission plugin (min, max and maxLimitRequestRatio, per
// container and per pod), of the ResourceQuota plugin (requests and
// limits of cpu and memory against status.hard and status.used), and the
// validation of a container's request against its limit. It is
// written from the plugins' rules, on its own, so that tests of the code
// that keeps pods within those bounds have an independent judge:
//
//	require.NoError(t, testadmit.Pod(patched, limitRanges, quotas))
//
// As LimitRanger does, a pod is checked as its mutating phase leaves it
// (Mutate): the LimitRanges' default requests and limits set on every
// container that lacks them, on create and on resize alike (LimitRanger
// admits pods/resize since Kubernetes 1.33). The LimitRanges are read as
// the API server stores them (Stored): a container item's default limit
// is its max where unset, its default request its default limit, else its
// min.
//
// The comparisons are exact, as 1.38's are; 1.37 compares thousandths
// (or whole units past 2^63 thousandths), the same for every quantity of
// at most three decimals.
package testadmit

import (
	"errors"
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

var checked = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// Pod returns why the API server would refuse pod, nil when it would not.
func Pod(pod *corev1.Pod, limitRanges []*corev1.LimitRange, quotas []*corev1.ResourceQuota) error {
	pod = Mutate(pod, limitRanges)
	errs := append(checkLimitRanges(nil, pod, limitRanges), requestsWithinLimits(pod)...)
	for _, q := range quotas {
		if !quotaApplies(q, pod) {
			continue
		}
		requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
		for name, hard := range q.Status.Hard {
			var usage resource.Quantity
			switch name {
			case corev1.ResourceRequestsCPU, corev1.ResourceCPU:
				usage = requests[corev1.ResourceCPU]
			case corev1.ResourceRequestsMemory, corev1.ResourceMemory:
				usage = requests[corev1.ResourceMemory]
			case corev1.ResourceLimitsCPU:
				usage = limits[corev1.ResourceCPU]
			case corev1.ResourceLimitsMemory:
				usage = limits[corev1.ResourceMemory]
			default:
				continue
			}
			total := q.Status.Used[name]
			total.Add(usage)
			if total.Cmp(hard) > 0 {
				errs = append(errs, fmt.Errorf("exceeded quota %s: requested %s=%s, used %s, limited %s",
					q.Name, name, usage.String(), ptr(q.Status.Used[name]).String(), hard.String()))
			}
		}
	}
	return errors.Join(errs...)
}

// Resize returns why LimitRanger would refuse the resize of old to pod, nil
// when it would not. Up to Kubernetes 1.37 it checks pod as it would a new
// one; from 1.38 (onlyChanges) it leaves out a container's resource whose
// request and limit the resize leaves as they were, and a resource of the
// pod whose total request and limit it leaves as they were.
//
// pod is checked as LimitRanger's mutation leaves it: a default of the
// LimitRanges set on a container that lacks the value is a change, checked
// on 1.38 too.
func Resize(old, pod *corev1.Pod, limitRanges []*corev1.LimitRange, onlyChanges bool) error {
	if !onlyChanges {
		old = nil
	}
	pod = Mutate(pod, limitRanges)
	return errors.Join(append(checkLimitRanges(old, pod, limitRanges), requestsWithinLimits(pod)...)...)
}

// requestsWithinLimits returns why the API server's validation refuses a
// container's cpu or memory request above its limit (a limit of 0
// included).
func requestsWithinLimits(pod *corev1.Pod) []error {
	var errs []error
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			for _, name := range checked {
				req, hasReq := c.Resources.Requests[name]
				lim, hasLim := c.Resources.Limits[name]
				if hasReq && hasLim && req.Cmp(lim) > 0 {
					errs = append(errs, fmt.Errorf("container %s: %s request %s is above its limit %s", c.Name, name, req.String(), lim.String()))
				}
			}
		}
	}
	return errs
}

// Stored returns lr as the API server stores it: each container item with
// its default limit set to its max where it has none, and its default
// request to its default limit, else to its min, where it has none.
func Stored(lr *corev1.LimitRange) *corev1.LimitRange {
	out := lr.DeepCopy()
	for i := range out.Spec.Limits {
		item := &out.Spec.Limits[i]
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		if item.Default == nil {
			item.Default = corev1.ResourceList{}
		}
		if item.DefaultRequest == nil {
			item.DefaultRequest = corev1.ResourceList{}
		}
		for name, q := range item.Max {
			if _, ok := item.Default[name]; !ok {
				item.Default[name] = q.DeepCopy()
			}
		}
		for name, q := range item.Default {
			if _, ok := item.DefaultRequest[name]; !ok {
				item.DefaultRequest[name] = q.DeepCopy()
			}
		}
		for name, q := range item.Min {
			if _, ok := item.DefaultRequest[name]; !ok {
				item.DefaultRequest[name] = q.DeepCopy()
			}
		}
	}
	return out
}

// Mutate returns pod as LimitRanger's mutating phase leaves it: for each
// LimitRange in turn (as stored), the default requests and limits of its
// container items set on every container and init container that lacks
// them. pod is not changed.
func Mutate(pod *corev1.Pod, limitRanges []*corev1.LimitRange) *corev1.Pod {
	out := pod.DeepCopy()
	for _, lr := range limitRanges {
		requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
		for _, item := range Stored(lr).Spec.Limits {
			if item.Type != corev1.LimitTypeContainer {
				continue
			}
			for name, q := range item.DefaultRequest {
				requests[name] = q
			}
			for name, q := range item.Default {
				limits[name] = q
			}
		}
		for _, cs := range [][]corev1.Container{out.Spec.Containers, out.Spec.InitContainers} {
			for i := range cs {
				r := &cs[i].Resources
				r.Requests = withDefaults(r.Requests, requests)
				r.Limits = withDefaults(r.Limits, limits)
			}
		}
	}
	return out
}

// withDefaults returns list with the entries of defaults it lacks.
func withDefaults(list, defaults corev1.ResourceList) corev1.ResourceList {
	for name, q := range defaults {
		if _, ok := list[name]; ok {
			continue
		}
		if list == nil {
			list = corev1.ResourceList{}
		}
		list[name] = q.DeepCopy()
	}
	return list
}

// checkLimitRanges checks pod against limitRanges, leaving out what is as in
// old (nil: nothing is).
func checkLimitRanges(old, pod *corev1.Pod, limitRanges []*corev1.LimitRange) []error {
	var errs []error
	opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
	for _, lr := range limitRanges {
		for _, item := range lr.Spec.Limits {
			switch item.Type {
			case corev1.LimitTypeContainer:
				for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
					for _, c := range cs {
						var was *corev1.ResourceRequirements
						if old != nil {
							was = containerResources(old, c.Name)
						}
						errs = append(errs, limitRange(item, "container "+c.Name, c.Resources.Requests, c.Resources.Limits, was)...)
					}
				}
			case corev1.LimitTypePod:
				var was *corev1.ResourceRequirements
				if old != nil {
					was = &corev1.ResourceRequirements{Requests: resourcehelper.PodRequests(old, opts), Limits: resourcehelper.PodLimits(old, opts)}
				}
				errs = append(errs, limitRange(item, "pod", resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts), was)...)
			}
		}
	}
	return errs
}

func containerResources(pod *corev1.Pod, name string) *corev1.ResourceRequirements {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i].Resources
			}
		}
	}
	return nil
}

// same tells whether name is in both lists with equal quantities, or in
// neither.
func same(name corev1.ResourceName, a, b corev1.ResourceList) bool {
	qa, inA := a[name]
	qb, inB := b[name]
	return inA == inB && (!inA || qa.Cmp(qb) == 0)
}

func ptr(q resource.Quantity) *resource.Quantity { return &q }

// limitRange checks one LimitRange item on one container or pod, leaving
// out a resource whose request and limit are those of was (nil: none is).
func limitRange(item corev1.LimitRangeItem, what string, requests, limits corev1.ResourceList, was *corev1.ResourceRequirements) []error {
	var errs []error
	for _, name := range checked {
		if was != nil && same(name, requests, was.Requests) && same(name, limits, was.Limits) {
			continue
		}
		req, hasReq := requests[name]
		lim, hasLim := limits[name]
		if m, ok := item.Min[name]; ok {
			switch {
			case !hasReq:
				errs = append(errs, fmt.Errorf("%s: minimum %s is %s, no request", what, name, m.String()))
			case req.Cmp(m) < 0:
				errs = append(errs, fmt.Errorf("%s: minimum %s is %s, request is %s", what, name, m.String(), req.String()))
			case hasLim && lim.Cmp(m) < 0:
				errs = append(errs, fmt.Errorf("%s: minimum %s is %s, limit is %s", what, name, m.String(), lim.String()))
			}
		}
		if m, ok := item.Max[name]; ok {
			switch {
			case !hasLim:
				errs = append(errs, fmt.Errorf("%s: maximum %s is %s, no limit", what, name, m.String()))
			case lim.Cmp(m) > 0:
				errs = append(errs, fmt.Errorf("%s: maximum %s is %s, limit is %s", what, name, m.String(), lim.String()))
			case hasReq && req.Cmp(m) > 0:
				errs = append(errs, fmt.Errorf("%s: maximum %s is %s, request is %s", what, name, m.String(), req.String()))
			}
		}
		if r, ok := item.MaxLimitRequestRatio[name]; ok {
			switch {
			case !hasReq || req.IsZero():
				errs = append(errs, fmt.Errorf("%s: %s ratio limited to %s, no request", what, name, r.String()))
			case !hasLim || lim.IsZero():
				errs = append(errs, fmt.Errorf("%s: %s ratio limited to %s, no limit", what, name, r.String()))
			default:
				// lim/req > r, exactly: lim × 1000 > r(milli) × req.
				left := new(big.Int).Mul(big.NewInt(lim.MilliValue()), big.NewInt(1000))
				right := new(big.Int).Mul(big.NewInt(r.MilliValue()), big.NewInt(req.MilliValue()))
				if left.Cmp(right) > 0 {
					errs = append(errs, fmt.Errorf("%s: %s ratio limited to %s, limit %s over request %s", what, name, r.String(),
						lim.String(), req.String()))
				}
			}
		}
	}
	return errs
}

// quotaApplies tells whether a quota's scopes select the pod (the scopes of
// pods the tests use).
func quotaApplies(q *corev1.ResourceQuota, pod *corev1.Pod) bool {
	scopes := append([]corev1.ResourceQuotaScope{}, q.Spec.Scopes...)
	if q.Spec.ScopeSelector != nil {
		for _, e := range q.Spec.ScopeSelector.MatchExpressions {
			if e.ScopeName == corev1.ResourceQuotaScopePriorityClass {
				in := false
				for _, v := range e.Values {
					in = in || v == pod.Spec.PriorityClassName
				}
				switch e.Operator {
				case corev1.ScopeSelectorOpIn:
					if !in {
						return false
					}
				case corev1.ScopeSelectorOpNotIn:
					if in {
						return false
					}
				case corev1.ScopeSelectorOpExists:
					if pod.Spec.PriorityClassName == "" {
						return false
					}
				case corev1.ScopeSelectorOpDoesNotExist:
					if pod.Spec.PriorityClassName != "" {
						return false
					}
				}
				continue
			}
			scopes = append(scopes, e.ScopeName)
		}
	}
	bestEffort := true
	for _, c := range pod.Spec.Containers {
		for _, name := range checked {
			if _, ok := c.Resources.Requests[name]; ok {
				bestEffort = false
			}
			if _, ok := c.Resources.Limits[name]; ok {
				bestEffort = false
			}
		}
	}
	for _, s := range scopes {
		switch s {
		case corev1.ResourceQuotaScopeBestEffort:
			if !bestEffort {
				return false
			}
		case corev1.ResourceQuotaScopeNotBestEffort:
			if bestEffort {
				return false
			}
		case corev1.ResourceQuotaScopeTerminating:
			if pod.Spec.ActiveDeadlineSeconds == nil {
				return false
			}
		case corev1.ResourceQuotaScopeNotTerminating:
			if pod.Spec.ActiveDeadlineSeconds != nil {
				return false
			}
		}
	}
	return true
}
