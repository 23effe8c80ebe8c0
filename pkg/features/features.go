// Package features defines the feature gates of vpa-inplace. Both binaries
// register them on their --feature-gates flag.
package features

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// Feature gates are listed in alphabetical order. Each names the components
// on which it must be enabled.
const (
	// InPlace enables the InPlace update mode: pods of VPAs with
	// updatePolicy.updateMode InPlace are resized through the pods/resize
	// subresource and never evicted.
	//
	// alpha, default off.
	// components: admission-controller, updater
	InPlace featuregate.Feature = "InPlace"

	// CPUStartupBoost enables the CPU startup boost of InPlace VPAs
	// (spec.startupBoost.cpu and containerPolicies[].startupBoost.cpu): the
	// admission controller raises a new pod's CPU, and the updater lowers it
	// in place once the pod has been Ready for the boost's duration. The
	// name is upstream VPA's gate of the same feature, so one flag means the
	// same on both projects.
	//
	// alpha, default off.
	// components: admission-controller, updater
	CPUStartupBoost featuregate.Feature = "CPUStartupBoost"
)

var defaultFeatureGates = map[featuregate.Feature]featuregate.FeatureSpec{
	InPlace:         {Default: false, PreRelease: featuregate.Alpha},
	CPUStartupBoost: {Default: false, PreRelease: featuregate.Alpha},
}

// NewFeatureGate returns a new mutable gate with every feature of this
// project registered at its default, and component-base's logging gates
// (LoggingAlphaOptions, LoggingBetaOptions, ContextualLogging), which guard
// logging flags both binaries offer, such as --log-json-split-stream.
// Binaries and tests each own one, so no global state leaks between them.
func NewFeatureGate() featuregate.MutableFeatureGate {
	gate := featuregate.NewFeatureGate()
	runtime.Must(gate.Add(defaultFeatureGates))
	runtime.Must(logsapi.AddFeatureGates(gate))
	return gate
}
