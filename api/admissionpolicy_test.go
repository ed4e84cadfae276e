package api

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidatingAdmissionPolicyDefaultsAndValidation(t *testing.T) {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{"CREATE"},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 5"}},
		},
	}
	ValidatingAdmissionPolicies.Default(p)
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail || *p.Spec.MatchConstraints.MatchPolicy != admissionregistrationv1.Equivalent ||
		p.Spec.MatchConstraints.NamespaceSelector == nil || p.Spec.MatchConstraints.ObjectSelector == nil ||
		*p.Spec.MatchConstraints.ResourceRules[0].Scope != admissionregistrationv1.AllScopes {
		t.Fatalf("defaults not applied: %+v", p.Spec)
	}
	checkErrors(t, ValidatingAdmissionPolicies.Validate(p))

	bad := p.DeepCopy()
	bad.Spec.Validations[0].Expression = "object.spec.replicas <="
	errs := ValidatingAdmissionPolicies.Validate(bad)
	if len(errs) != 1 || errs[0].Field != "spec.validations[0].expression" || !strings.Contains(errs[0].Detail, "compilation failed: ERROR: <input>:1:") {
		t.Errorf("bad expression: %v", errs)
	}
	notBool := p.DeepCopy()
	notBool.Spec.Validations[0].Expression = "'a string'"
	if errs := ValidatingAdmissionPolicies.Validate(notBool); len(errs) != 1 {
		t.Errorf("a string-valued validation: %v, want one error", errs)
	}
	noRules := p.DeepCopy()
	noRules.Spec.MatchConstraints.ResourceRules = nil
	if errs := ValidatingAdmissionPolicies.Validate(noRules); len(errs) != 1 || errs[0].Field != "spec.matchConstraints.resourceRules" {
		t.Errorf("no rules: %v", errs)
	}
	badParam := p.DeepCopy()
	badParam.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1"}
	if errs := ValidatingAdmissionPolicies.Validate(badParam); len(errs) != 1 || errs[0].Field != "spec.paramKind.kind" {
		t.Errorf("paramKind without kind: %v", errs)
	}
}

func TestValidatingAdmissionPolicyBindingValidation(t *testing.T) {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "max-replicas"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "max-replicas",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits"},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	ValidatingAdmissionPolicyBindings.Default(b)
	if *b.Spec.ParamRef.ParameterNotFoundAction != admissionregistrationv1.DenyAction {
		t.Errorf("parameterNotFoundAction = %v, want Deny", *b.Spec.ParamRef.ParameterNotFoundAction)
	}
	checkErrors(t, ValidatingAdmissionPolicyBindings.Validate(b))

	both := b.DeepCopy()
	both.Spec.ValidationActions = append(both.Spec.ValidationActions, admissionregistrationv1.Warn)
	if errs := ValidatingAdmissionPolicyBindings.Validate(both); len(errs) != 1 || !strings.Contains(errs[0].Detail, "must not contain both Deny and Warn") {
		t.Errorf("Deny and Warn: %v", errs)
	}
	none := b.DeepCopy()
	none.Spec.ValidationActions = nil
	if errs := ValidatingAdmissionPolicyBindings.Validate(none); len(errs) != 1 || errs[0].Field != "spec.validationActions" {
		t.Errorf("no actions: %v", errs)
	}
	unknown := b.DeepCopy()
	unknown.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{"Shout"}
	if errs := ValidatingAdmissionPolicyBindings.Validate(unknown); len(errs) != 1 || errs[0].Field != "spec.validationActions[0]" {
		t.Errorf("unknown action: %v", errs)
	}
	sel := b.DeepCopy()
	sel.Spec.ParamRef.Selector = &metav1.LabelSelector{}
	if errs := ValidatingAdmissionPolicyBindings.Validate(sel); len(errs) != 1 {
		t.Errorf("name and selector: %v", errs)
	}
}
