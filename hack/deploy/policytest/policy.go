// Package policytest evaluates the ValidatingAdmissionPolicies of
// deploy/base/updater/policy with the API server's own admission code
// (k8s.io/apiserver), without a cluster: which changes the updater's
// ServiceAccount may make, the messages of the others, and what the
// expressions cost. A module of its own, so that nothing enters the
// product's go.mod.
package policytest

import (
	"context"
	"fmt"
	"os"
	"regexp"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// Policy is one compiled ValidatingAdmissionPolicy.
type Policy struct {
	Spec       admissionregistrationv1.ValidatingAdmissionPolicy
	validator  validating.Validator
	conditions cel.ConditionEvaluator
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Load compiles the ValidatingAdmissionPolicies of a YAML file, by name, as
// the API server does.
func Load(path string) (map[string]*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]*Policy{}
	for _, doc := range separator.Split(string(data), -1) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, err
		}
		if meta.Kind != "ValidatingAdmissionPolicy" {
			continue
		}
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
			return nil, err
		}
		compiled, err := compile(&p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		out[p.Name] = compiled
	}
	return out, nil
}

// compile follows compilePolicy of k8s.io/apiserver's validating plugin.
func compile(p *admissionregistrationv1.ValidatingAdmissionPolicy) (*Policy, error) {
	compiler, err := cel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, err
	}
	vars := cel.OptionalVariableDeclarations{HasAuthorizer: true}
	var named []cel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		named = append(named, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	compiler.CompileAndStoreVariables(named, vars, environment.StoredExpressions)
	var match []cel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		match = append(match, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	var validations, messages []cel.ExpressionAccessor
	for _, v := range p.Spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		messages = append(messages, nil)
	}
	conditions := compiler.CompileCondition(validations, vars, environment.StoredExpressions)
	for _, r := range conditions.CompilationErrors() {
		return nil, r
	}
	matcher := matchconditions.NewMatcher(compiler.CompileCondition(match, vars, environment.StoredExpressions),
		p.Spec.FailurePolicy, "policy", "validate", p.Name)
	validator := validating.NewValidator(conditions, matcher,
		compiler.CompileCondition(nil, vars, environment.StoredExpressions),
		compiler.CompileCondition(messages, cel.OptionalVariableDeclarations{}, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
	return &Policy{Spec: *p, validator: validator, conditions: conditions}, nil
}

// Matches tells whether the API server sends the request to the policy at
// all: its matchConstraints, evaluated by the API server's own matcher
// (resource rules, subresources included), with the defaults the API server
// gives a stored policy.
func (p *Policy) Matches(r Request) (bool, error) {
	spec := p.Spec.DeepCopy()
	constraints := spec.Spec.MatchConstraints
	if constraints == nil {
		constraints = &admissionregistrationv1.MatchResources{}
		spec.Spec.MatchConstraints = constraints
	}
	if constraints.NamespaceSelector == nil {
		constraints.NamespaceSelector = &metav1.LabelSelector{}
	}
	if constraints.ObjectSelector == nil {
		constraints.ObjectSelector = &metav1.LabelSelector{}
	}
	if constraints.MatchPolicy == nil {
		equivalent := admissionregistrationv1.Equivalent
		constraints.MatchPolicy = &equivalent
	}
	matcher := generic.NewPolicyMatcher(matching.NewMatcher(nil, nil))
	ok, _, _, err := matcher.DefinitionMatches(r.attributes().Attributes,
		admission.NewObjectInterfacesFromScheme(runtime.NewScheme()), validating.NewValidatingAdmissionPolicyAccessor(spec))
	return ok, err
}

// Request is one admission request.
type Request struct {
	User        string
	Operation   admission.Operation
	Resource    schema.GroupVersionResource
	Kind        schema.GroupVersionKind
	Subresource string
	Object      runtime.Object
	OldObject   runtime.Object
}

func (r Request) attributes() *admission.VersionedAttributes {
	obj := r.Object
	if obj == nil {
		obj = r.OldObject
	}
	accessor, _ := obj.(metav1.Object)
	var options runtime.Object = &metav1.UpdateOptions{}
	attrs := admission.NewAttributesRecord(r.Object, r.OldObject, r.Kind, accessor.GetNamespace(), accessor.GetName(),
		r.Resource, r.Subresource, r.Operation, options, false, &user.DefaultInfo{Name: r.User})
	return &admission.VersionedAttributes{Attributes: attrs, VersionedKind: r.Kind, VersionedObject: admission.NewLazyObject(r.Object), VersionedOldObject: admission.NewLazyObject(r.OldObject)}
}

// Decision is what the policy decides for one request: no denial (Denied
// false), or the message of the first rule refusing it, as the API server
// reports it.
type Decision struct {
	Denied  bool
	Reason  metav1.StatusReason
	Message string
}

// Validate evaluates the policy on the request with the API server's
// budget.
func (p *Policy) Validate(ctx context.Context, r Request) Decision {
	res := p.validator.Validate(ctx, r.Resource, r.attributes(), nil, namespace(r), celconfig.RuntimeCELCostBudget, nil)
	for _, d := range res.Decisions {
		if d.Action == validating.ActionDeny {
			return Decision{Denied: true, Reason: d.Reason, Message: d.Message}
		}
	}
	return Decision{}
}

// Cost is the runtime cost of evaluating every validation of the policy on
// the request (the API server's budget for a policy is
// celconfig.RuntimeCELCostBudget).
func (p *Policy) Cost(ctx context.Context, r Request) (int64, error) {
	budget := int64(celconfig.RuntimeCELCostBudget)
	req := cel.CreateAdmissionRequest(r.attributes().Attributes, metav1.GroupVersionResource(r.Resource), metav1.GroupVersionKind(r.Kind))
	results, remaining, err := p.conditions.ForInput(ctx, r.attributes(), req, cel.OptionalVariableBindings{}, cel.CreateNamespaceObject(namespace(r)), budget)
	if err != nil {
		return 0, err
	}
	for _, res := range results {
		if res.Error != nil {
			return 0, res.Error
		}
	}
	return budget - remaining, nil
}

func namespace(r Request) *corev1.Namespace {
	obj := r.Object
	if obj == nil {
		obj = r.OldObject
	}
	accessor, _ := obj.(metav1.Object)
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: accessor.GetNamespace()}}
}
