package admission

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
)

// InPlaceGateMessage is the reason given when a VPA asks for updateMode
// InPlace while the InPlace feature gate is off.
var InPlaceGateMessage = fmt.Sprintf(
	"updateMode %q requires the %s feature gate: start the vpa-inplace admission controller with --feature-gates=%s=true",
	vpatypes.UpdateModeInPlace, features.InPlace, features.InPlace)

var (
	specPath       = field.NewPath("spec")
	updateModePath = specPath.Child("updatePolicy", "updateMode")
)

var (
	controlledValues = []string{
		string(vpatypes.ContainerControlledValuesRequestsAndLimits),
		string(vpatypes.ContainerControlledValuesRequestsOnly),
	}
	managedResources = []string{string(corev1.ResourceCPU), string(corev1.ResourceMemory)}
	startupBoostType = []string{string(vpatypes.FactorStartupBoostType), string(vpatypes.QuantityStartupBoostType)}
	one              = resource.MustParse("1")
)

// ValidateVPA checks a VPA being created (old nil) or updated (old is the
// stored object) the way VPA users expect, plus the InPlace feature gate:
//
//   - updateMode InPlace is accepted when inPlaceEnabled, or on an update of a
//     VPA that already was InPlace (so that existing objects are not stuck
//     when the gate is turned off); otherwise it is Forbidden with
//     InPlaceGateMessage;
//   - updateMode must be one of the modes of the VPA API (Auto is deprecated:
//     a warning); minReplicas and evictAfterOOMSeconds must be positive;
//   - targetRef with kind and name is required (on update only if the old
//     object had one);
//   - container policies: a container name, no duplicate names, known mode
//     and controlledValues, controlledResources among cpu and memory (others
//     already present in the old object are let through with a warning),
//     minAllowed and maxAllowed non-negative, in whole millicores and bytes,
//     and min not above max, per-VPA tuning values in range;
//   - startupBoost: a known type with its parameter in range;
//   - at most one recommender, with a name.
//
// On an update, an error that the stored object has too, at the same field
// with the same value, is dropped (a ratchet): values unchanged from the old
// object are accepted, only changed ones are validated. A VPA stored before
// a rule existed (minAllowed.memory: 0.1Gi, say) can still be labelled,
// annotated or edited elsewhere. The feature gate has its own rule above.
//
// It returns warnings for the response and all errors found. Feature gates of
// upstream VPA (CPUStartupBoost, PerVPAConfig) are not enforced here: they
// belong to upstream's components.
func ValidateVPA(vpa, old *vpatypes.VerticalPodAutoscaler, inPlaceEnabled bool) ([]string, field.ErrorList) {
	warnings, errs := validateVPA(vpa, old, inPlaceEnabled)
	if old == nil || len(errs) == 0 {
		return warnings, errs
	}
	// The stored object's own errors, judged as if created with the gate
	// on: the gate's error is never among them, so never dropped.
	_, oldErrs := validateVPA(old, nil, true)
	stored := make(map[string]bool, len(oldErrs))
	for _, e := range oldErrs {
		stored[e.Error()] = true
	}
	kept := errs[:0:0]
	for _, e := range errs {
		if stored[e.Error()] && !IsFeatureGateError(e) {
			continue
		}
		kept = append(kept, e)
	}
	return warnings, kept
}

func validateVPA(vpa, old *vpatypes.VerticalPodAutoscaler, inPlaceEnabled bool) ([]string, field.ErrorList) {
	var warnings []string
	var errs field.ErrorList
	spec := &vpa.Spec

	ref := specPath.Child("targetRef")
	switch {
	case spec.TargetRef == nil:
		if old == nil || old.Spec.TargetRef != nil {
			errs = append(errs, field.Required(ref, "the workload to autoscale (apiVersion, kind and name of its controller)"))
		}
	default:
		if spec.TargetRef.Kind == "" {
			errs = append(errs, field.Required(ref.Child("kind"), ""))
		}
		if spec.TargetRef.Name == "" {
			errs = append(errs, field.Required(ref.Child("name"), ""))
		}
	}

	if spec.UpdatePolicy != nil {
		w, e := validateUpdatePolicy(spec.UpdatePolicy, old, inPlaceEnabled)
		warnings = append(warnings, w...)
		errs = append(errs, e...)
	}
	if spec.ResourcePolicy != nil {
		w, e := validateResourcePolicy(spec.ResourcePolicy, old)
		warnings = append(warnings, w...)
		errs = append(errs, e...)
	}
	if spec.StartupBoost != nil {
		errs = append(errs, validateStartupBoost(spec.StartupBoost, specPath.Child("startupBoost"))...)
	}
	recommenders := specPath.Child("recommenders")
	if len(spec.Recommenders) > 1 {
		errs = append(errs, field.TooMany(recommenders, len(spec.Recommenders), 1))
	}
	for i, r := range spec.Recommenders {
		if r == nil || r.Name == "" {
			errs = append(errs, field.Required(recommenders.Index(i).Child("name"), ""))
		}
	}
	return warnings, errs
}

// IsFeatureGateError tells whether err is the error ValidateVPA returns for
// updateMode InPlace while the gate is off.
func IsFeatureGateError(err *field.Error) bool {
	return err != nil && err.Type == field.ErrorTypeForbidden && err.Field == updateModePath.String() && err.Detail == InPlaceGateMessage
}

func validateUpdatePolicy(p *vpatypes.PodUpdatePolicy, old *vpatypes.VerticalPodAutoscaler, inPlaceEnabled bool) ([]string, field.ErrorList) {
	var warnings []string
	var errs field.ErrorList
	path := specPath.Child("updatePolicy")
	mode := p.UpdateMode
	switch {
	case mode == nil:
		errs = append(errs, field.Required(updateModePath, "updateMode is required when updatePolicy is set; one of "+strings.Join(quoted(vpatypes.GetUpdateModesList()), ", ")))
	default:
		if _, ok := vpatypes.GetUpdateModes()[*mode]; !ok {
			errs = append(errs, field.NotSupported(updateModePath, *mode, vpatypes.GetUpdateModesList()))
		}
		if *mode == vpatypes.UpdateModeAuto { //nolint:staticcheck // deprecated upstream, still valid
			warnings = append(warnings, fmt.Sprintf("%s: %q is deprecated; use one of %s", updateModePath, *mode,
				strings.Join(quoted(vpatypes.GetUpdateModesList()), ", ")))
		}
		if *mode == vpatypes.UpdateModeInPlace && !inPlaceEnabled && !wasInPlace(old) {
			errs = append(errs, field.Forbidden(updateModePath, InPlaceGateMessage))
		}
		if *mode == vpatypes.UpdateModeInPlace {
			if len(p.EvictionRequirements) > 0 {
				warnings = append(warnings, fmt.Sprintf("%s: has no effect with updateMode %q, which never evicts pods", path.Child("evictionRequirements"), *mode))
			}
			if p.EvictAfterOOMSeconds != nil {
				warnings = append(warnings, fmt.Sprintf("%s: has no effect with updateMode %q, which never evicts pods", path.Child("evictAfterOOMSeconds"), *mode))
			}
		}
	}
	if p.MinReplicas != nil && *p.MinReplicas <= 0 {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), *p.MinReplicas, "must be greater than 0"))
	}
	if p.EvictAfterOOMSeconds != nil && *p.EvictAfterOOMSeconds < 1 {
		errs = append(errs, field.Invalid(path.Child("evictAfterOOMSeconds"), *p.EvictAfterOOMSeconds, "must be at least 1"))
	}
	return warnings, errs
}

// wasInPlace tells whether the stored object asked for updateMode InPlace.
func wasInPlace(old *vpatypes.VerticalPodAutoscaler) bool {
	return old != nil && old.Spec.UpdatePolicy != nil && old.Spec.UpdatePolicy.UpdateMode != nil &&
		*old.Spec.UpdatePolicy.UpdateMode == vpatypes.UpdateModeInPlace
}

func validateResourcePolicy(rp *vpatypes.PodResourcePolicy, old *vpatypes.VerticalPodAutoscaler) ([]string, field.ErrorList) {
	var warnings []string
	var errs field.ErrorList
	existing := existingControlledResources(old)
	seen := map[string]bool{}
	for i := range rp.ContainerPolicies {
		policy := &rp.ContainerPolicies[i]
		path := specPath.Child("resourcePolicy", "containerPolicies").Index(i)

		switch {
		case policy.ContainerName == "":
			errs = append(errs, field.Required(path.Child("containerName"), `a container name, or "*" for all containers`))
		case seen[policy.ContainerName]:
			errs = append(errs, field.Duplicate(path.Child("containerName"), policy.ContainerName))
		default:
			seen[policy.ContainerName] = true
		}

		if policy.Mode != nil {
			if _, ok := vpatypes.GetScalingModes()[*policy.Mode]; !ok {
				errs = append(errs, field.NotSupported(path.Child("mode"), *policy.Mode, vpatypes.GetPossibleScalingModes()))
			}
		}
		if policy.ControlledValues != nil {
			if !slices.Contains(controlledValues, string(*policy.ControlledValues)) {
				errs = append(errs, field.NotSupported(path.Child("controlledValues"), *policy.ControlledValues, controlledValues))
			}
			if policy.Mode != nil && *policy.Mode == vpatypes.ContainerScalingModeOff &&
				*policy.ControlledValues == vpatypes.ContainerControlledValuesRequestsAndLimits {
				errs = append(errs, field.Forbidden(path.Child("controlledValues"), "must not be set when the container's mode is Off"))
			}
		}

		w, e := validateBounds(policy, path)
		warnings = append(warnings, w...)
		errs = append(errs, e...)

		if policy.ControlledResources != nil {
			dup := map[corev1.ResourceName]bool{}
			for j, name := range *policy.ControlledResources {
				rpath := path.Child("controlledResources").Index(j)
				if dup[name] {
					errs = append(errs, field.Duplicate(rpath, name))
					continue
				}
				dup[name] = true
				if slices.Contains(managedResources, string(name)) {
					continue
				}
				if existing[name] {
					warnings = append(warnings, fmt.Sprintf("%s: %q is not supported (only %s) and is kept only because the existing object has it",
						rpath, name, strings.Join(quoted(managedResources), " and ")))
					continue
				}
				errs = append(errs, field.NotSupported(rpath, name, managedResources))
			}
		}

		if q := policy.OOMBumpUpRatio; q != nil && q.Cmp(one) < 0 {
			errs = append(errs, field.Invalid(path.Child("oomBumpUpRatio"), q.String(), "must be at least 1"))
		}
		if q := policy.OOMMinBumpUp; q != nil && q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("oomMinBumpUp"), q.String(), "must not be negative"))
		}
		if v := policy.MemoryAggregationIntervalSeconds; v != nil && *v < 1 {
			errs = append(errs, field.Invalid(path.Child("memoryAggregationIntervalSeconds"), *v, "must be at least 1"))
		}
		if v := policy.MemoryAggregationIntervalCount; v != nil && *v < 1 {
			errs = append(errs, field.Invalid(path.Child("memoryAggregationIntervalCount"), *v, "must be at least 1"))
		}
		if policy.StartupBoost != nil {
			errs = append(errs, validateStartupBoost(policy.StartupBoost, path.Child("startupBoost"))...)
		}
	}
	return warnings, errs
}

// validateBounds checks minAllowed and maxAllowed of a container policy.
func validateBounds(policy *vpatypes.ContainerResourcePolicy, path *field.Path) ([]string, field.ErrorList) {
	var warnings []string
	var errs field.ErrorList
	for _, b := range []struct {
		name string
		list corev1.ResourceList
	}{{"minAllowed", policy.MinAllowed}, {"maxAllowed", policy.MaxAllowed}} {
		for _, name := range sortedNames(b.list) {
			q := b.list[name]
			qpath := path.Child(b.name).Key(string(name))
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(qpath, q.String(), "must not be negative"))
				continue
			}
			switch name {
			case corev1.ResourceCPU:
				if _, exact := q.AsScale(resource.Milli); !exact {
					errs = append(errs, field.Invalid(qpath, q.String(), "must be a whole number of millicores"))
				}
			case corev1.ResourceMemory:
				if _, exact := q.AsScale(0); !exact {
					errs = append(errs, field.Invalid(qpath, q.String(), "must be a whole number of bytes"))
				}
			default:
				warnings = append(warnings, fmt.Sprintf("%s: is ignored: a VPA recommends only %s", qpath, strings.Join(quoted(managedResources), " and ")))
			}
		}
	}
	for _, name := range sortedNames(policy.MinAllowed) {
		minQ := policy.MinAllowed[name]
		if maxQ, ok := policy.MaxAllowed[name]; ok && maxQ.Cmp(minQ) < 0 {
			errs = append(errs, field.Invalid(path.Child("maxAllowed").Key(string(name)), maxQ.String(),
				fmt.Sprintf("must not be less than minAllowed %s (%s)", name, minQ.String())))
		}
	}
	return warnings, errs
}

func validateStartupBoost(b *vpatypes.StartupBoost, path *field.Path) field.ErrorList {
	if b.CPU == nil {
		return nil
	}
	var errs field.ErrorList
	path = path.Child("cpu")
	switch b.CPU.Type {
	case "":
		errs = append(errs, field.Required(path.Child("type"), "one of "+strings.Join(quoted(startupBoostType), ", ")))
	case vpatypes.FactorStartupBoostType:
		switch {
		case b.CPU.Factor == nil:
			errs = append(errs, field.Required(path.Child("factor"), "required when type is "+string(vpatypes.FactorStartupBoostType)))
		case *b.CPU.Factor < 1:
			errs = append(errs, field.Invalid(path.Child("factor"), *b.CPU.Factor, "must be at least 1"))
		}
	case vpatypes.QuantityStartupBoostType:
		switch q := b.CPU.Quantity; {
		case q == nil:
			errs = append(errs, field.Required(path.Child("quantity"), "required when type is "+string(vpatypes.QuantityStartupBoostType)))
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(path.Child("quantity"), q.String(), "must not be negative"))
		default:
			if _, exact := q.AsScale(resource.Milli); !exact {
				errs = append(errs, field.Invalid(path.Child("quantity"), q.String(), "must be a whole number of millicores"))
			}
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), b.CPU.Type, startupBoostType))
	}
	if d := b.CPU.DurationSeconds; d != nil && *d < 0 {
		errs = append(errs, field.Invalid(path.Child("durationSeconds"), *d, "must not be negative"))
	}
	return errs
}

func existingControlledResources(old *vpatypes.VerticalPodAutoscaler) map[corev1.ResourceName]bool {
	out := map[corev1.ResourceName]bool{}
	if old == nil || old.Spec.ResourcePolicy == nil {
		return out
	}
	for _, p := range old.Spec.ResourcePolicy.ContainerPolicies {
		if p.ControlledResources == nil {
			continue
		}
		for _, name := range *p.ControlledResources {
			out[name] = true
		}
	}
	return out
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func quoted(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
