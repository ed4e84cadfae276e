package api

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// JobOrphanWarning is kube-apiserver's warning to a delete of a batch/v1
// Job that names no propagation policy: such a delete orphans the Job's
// pods, for backwards compatibility.
const JobOrphanWarning = "child pods are preserved by default when jobs are deleted; " +
	"set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"

// Jobs (batch/v1): pods run to completion. A Job's defaults are kube's
// SetDefaults_Job, its validation kube's ValidateJob and ValidateJobUpdate,
// its selector the one kube generates from its uid.

// The labels a Job's generated selector and pod template carry, and the
// Job's defaults.
const (
	JobControllerUIDLabel       = batchv1.ControllerUidLabel // batch.kubernetes.io/controller-uid
	JobNameLabel                = batchv1.JobNameLabel       // batch.kubernetes.io/job-name
	LegacyJobControllerUIDLabel = "controller-uid"
	LegacyJobNameLabel          = "job-name"

	DefaultJobBackoffLimit = 6
)

// The limits kube's Job validation enforces.
const (
	maxParallelismForIndexedJob            = 100000
	maxCompletionsWithBackoffLimitPerIndex = 100000
	maxFailedIndexesLimit                  = 100000
	maxPodFailurePolicyRules               = 20
	maxPodFailurePolicyExitCodes           = 255
	maxPodFailurePolicyConditions          = 20
	maxSuccessPolicyRules                  = 20
	maxSucceededIndexesLength              = 64 * 1024
)

var jobFieldLabels = []string{"status.successful"}

// defaultJob is kube's SetDefaults_Job: a Job that names neither
// completions nor parallelism runs one pod to one completion; parallelism
// defaults to 1, backoffLimit to 6 (to "no limit" when each index has its
// own), completionMode to NonIndexed, suspend to false, a pod condition
// pattern's status to True, and podReplacementPolicy to Failed with a pod
// failure policy and TerminatingOrFailed without. The Job's labels default
// to its template's.
func defaultJob(job *batchv1.Job) {
	spec := &job.Spec
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptrTo(int32(1))
	}
	if spec.Parallelism == nil {
		spec.Parallelism = ptrTo(int32(1))
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = ptrTo(int32(math.MaxInt32))
		} else {
			spec.BackoffLimit = ptrTo(int32(DefaultJobBackoffLimit))
		}
	}
	if len(job.Labels) == 0 && spec.Template.Labels != nil {
		job.Labels = maps.Clone(spec.Template.Labels)
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptrTo(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptrTo(false)
	}
	if pfp := spec.PodFailurePolicy; pfp != nil {
		for i := range pfp.Rules {
			for j := range pfp.Rules[i].OnPodConditions {
				if pfp.Rules[i].OnPodConditions[j].Status == "" {
					pfp.Rules[i].OnPodConditions[j].Status = corev1.ConditionTrue
				}
			}
		}
	}
	if spec.PodReplacementPolicy == nil {
		if spec.PodFailurePolicy != nil {
			spec.PodReplacementPolicy = ptrTo(batchv1.Failed)
		} else {
			spec.PodReplacementPolicy = ptrTo(batchv1.TerminatingOrFailed)
		}
	}
	defaultPodSpec(&spec.Template.Spec)
}

// A new Job starts at generation 1 with an empty status and, unless it
// asks for a manual selector, the selector kube generates: its own uid
// under batch.kubernetes.io/controller-uid, which only its pods can carry.
// The template gets that label, the Job's name under
// batch.kubernetes.io/job-name, and both under their legacy keys
// (controller-uid, job-name), unless the user set them: a conflicting
// value is then refused by validation. Labels the Job took from its
// template take them too. An update keeps the status and
// bumps the generation when the spec changed.

func prepareJobForCreate(job *batchv1.Job) {
	job.Generation = 1
	job.Status = batchv1.JobStatus{}
	if job.Spec.ManualSelector == nil || !*job.Spec.ManualSelector {
		// Labels defaulted from the template take the generated ones too,
		// as kube's Jobs show them: their name and uid.
		fromTemplate := len(job.Labels) == 0 || maps.Equal(job.Labels, job.Spec.Template.Labels)
		generateJobSelector(job)
		if fromTemplate {
			job.Labels = maps.Clone(job.Spec.Template.Labels)
		}
	}
}

func generateJobSelector(job *batchv1.Job) {
	tmpl := &job.Spec.Template
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	for key, value := range map[string]string{
		LegacyJobNameLabel: job.Name, JobNameLabel: job.Name,
		LegacyJobControllerUIDLabel: string(job.UID), JobControllerUIDLabel: string(job.UID),
	} {
		if _, set := tmpl.Labels[key]; !set {
			tmpl.Labels[key] = value
		}
	}
	if job.Spec.Selector == nil {
		job.Spec.Selector = &metav1.LabelSelector{}
	}
	if job.Spec.Selector.MatchLabels == nil {
		job.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, set := job.Spec.Selector.MatchLabels[JobControllerUIDLabel]; !set {
		job.Spec.Selector.MatchLabels[JobControllerUIDLabel] = string(job.UID)
	}
}

func prepareJobForUpdate(job, old *batchv1.Job) {
	job.Status = old.Status
	job.Generation = nextGeneration(old, job.Spec, old.Spec)
}

// validateJob is kube's ValidateJob: the generated selector (unless
// manual), the spec, and the counts of the status, which the job
// controller writes.
func validateJob(job *batchv1.Job) field.ErrorList {
	errs := validateGeneratedJobSelector(job)
	errs = append(errs, validateJobSpec(&job.Spec, field.NewPath("spec"))...)
	return append(errs, validateJobStatus(&job.Status, field.NewPath("status"))...)
}

// validateGeneratedJobSelector is kube's ValidateGeneratedSelector: a Job
// without a manual selector must carry the labels and the selector
// prepareJobForCreate generates, with its own uid and name.
func validateGeneratedJobSelector(job *batchv1.Job) field.ErrorList {
	if (job.Spec.ManualSelector != nil && *job.Spec.ManualSelector) || job.Spec.Selector == nil {
		return nil
	}
	var errs field.ErrorList
	if job.UID == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "uid"), ""))
	}
	metaPath := field.NewPath("spec", "template", "metadata")
	errs = append(errs, hasLabel(job.Spec.Template.Labels, metaPath, JobControllerUIDLabel, string(job.UID))...)
	errs = append(errs, hasLabel(job.Spec.Template.Labels, metaPath, JobNameLabel, job.Name)...)
	want := labels.Set{JobControllerUIDLabel: string(job.UID), JobNameLabel: job.Name}
	if sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector); err == nil && !sel.Matches(want) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), job.Spec.Selector, "`selector` not auto-generated"))
	}
	return errs
}

// hasLabel is kube's ValidateHasLabel.
func hasLabel(l map[string]string, metaPath *field.Path, key, value string) field.ErrorList {
	actual, ok := l[key]
	if !ok {
		return field.ErrorList{field.Required(metaPath.Child("labels").Key(key), "must be '"+value+"'")}
	}
	if actual != value {
		return field.ErrorList{field.Invalid(metaPath.Child("labels").Key(key), actual, "must be '"+value+"'")}
	}
	return nil
}

// validateJobSpec is kube's ValidateJobSpec: non-negative counts, the
// limits of Indexed Jobs and of backoff per index, the pod failure,
// success and replacement policies, a selector that matches the template,
// and a template that is a valid pod which restarts OnFailure or Never.
func validateJobSpec(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, v := range map[string]*int32{
		"parallelism": spec.Parallelism, "completions": spec.Completions, "backoffLimit": spec.BackoffLimit,
		"ttlSecondsAfterFinished": spec.TTLSecondsAfterFinished, "backoffLimitPerIndex": spec.BackoffLimitPerIndex,
		"maxFailedIndexes": spec.MaxFailedIndexes,
	} {
		if v != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*v), fldPath.Child(name))...)
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	if spec.MaxFailedIndexes != nil && spec.BackoffLimitPerIndex == nil {
		errs = append(errs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
	}
	if spec.ManagedBy != nil {
		errs = append(errs, validateJobManagedBy(*spec.ManagedBy, fldPath.Child("managedBy"))...)
	}
	errs = append(errs, validateJobCompletionMode(spec, fldPath)...)
	if spec.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(spec, fldPath.Child("podFailurePolicy"))...)
	}
	if spec.SuccessPolicy != nil {
		errs = append(errs, validateSuccessPolicy(spec, fldPath.Child("successPolicy"))...)
	}
	errs = append(errs, validatePodReplacementPolicy(spec, fldPath.Child("podReplacementPolicy"))...)

	selPath := fldPath.Child("selector")
	if spec.Selector == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if sel, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !sel.Matches(labels.Set(spec.Template.Labels)) {
			errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	return append(errs, validateJobTemplate(spec, fldPath.Child("template"))...)
}

func validateJobManagedBy(managedBy string, fldPath *field.Path) field.ErrorList {
	const maxLength = 63
	var errs field.ErrorList
	if len(managedBy) > maxLength {
		errs = append(errs, field.TooLong(fldPath, "", maxLength))
	}
	if !strings.Contains(managedBy, "/") {
		errs = append(errs, field.Invalid(fldPath, managedBy, "must be a domain-prefixed path (such as \"acme.io/foo\")"))
	}
	return errs
}

func validateJobCompletionMode(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mode := spec.CompletionMode
	if mode != nil && *mode != batchv1.NonIndexedCompletion && *mode != batchv1.IndexedCompletion {
		errs = append(errs, field.NotSupported(fldPath.Child("completionMode"), *mode,
			[]batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
	}
	if mode != nil && *mode == batchv1.IndexedCompletion {
		if spec.Completions == nil {
			errs = append(errs, field.Required(fldPath.Child("completions"), "when completion mode is Indexed"))
		}
		if spec.Parallelism != nil && *spec.Parallelism > maxParallelismForIndexedJob {
			errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
				fmt.Sprintf("must be less than or equal to %d when completion mode is Indexed", maxParallelismForIndexedJob)))
		}
		if spec.Completions != nil && spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > *spec.Completions {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "must be less than or equal to completions"))
		}
		if spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > maxFailedIndexesLimit {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes,
				fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesLimit)))
		}
		if spec.Completions != nil && spec.BackoffLimitPerIndex != nil && *spec.Completions > maxCompletionsWithBackoffLimitPerIndex {
			errs = append(errs, field.Invalid(fldPath.Child("completions"), *spec.Completions,
				fmt.Sprintf("must be less than or equal to %d when backoffLimitPerIndex is specified", maxCompletionsWithBackoffLimitPerIndex)))
		}
		return errs
	}
	if spec.BackoffLimitPerIndex != nil {
		errs = append(errs, field.Invalid(fldPath.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex, "requires indexed completion mode"))
	}
	if spec.MaxFailedIndexes != nil {
		errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "requires indexed completion mode"))
	}
	return errs
}

// validateJobTemplate checks the pod template: labels, annotations, a
// valid pod spec, and a restart policy of OnFailure or Never (Never only,
// with a pod failure policy). Defaulting makes an unset restartPolicy
// Always, so Always reads as "not set", as in kube.
func validateJobTemplate(spec *batchv1.JobSpec, tmplPath *field.Path) field.ErrorList {
	tmpl := &spec.Template
	errs := validateLabels(tmpl.Labels, tmplPath.Child("metadata", "labels"))
	errs = append(errs, validateAnnotations(tmpl.Annotations, tmplPath.Child("metadata", "annotations"))...)
	errs = append(errs, validatePodSpec(&tmpl.Spec, tmplPath.Child("spec"))...)
	rpPath := tmplPath.Child("spec", "restartPolicy")
	switch p := tmpl.Spec.RestartPolicy; {
	case p == corev1.RestartPolicyAlways || p == "":
		errs = append(errs, field.Required(rpPath, fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	case p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever:
		errs = append(errs, field.NotSupported(rpPath, p, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	case spec.PodFailurePolicy != nil && p != corev1.RestartPolicyNever:
		errs = append(errs, field.Invalid(rpPath, p, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	return errs
}

var supportedPodFailurePolicyActions = []batchv1.PodFailurePolicyAction{
	batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex,
	batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore,
}

// validatePodFailurePolicy is kube's: at most 20 rules, each with a known
// action and exactly one of onExitCodes and onPodConditions.
func validatePodFailurePolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := spec.PodFailurePolicy.Rules
	if len(rules) > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxPodFailurePolicyRules))
	}
	containers := map[string]bool{}
	for _, c := range spec.Template.Spec.Containers {
		containers[c.Name] = true
	}
	for _, c := range spec.Template.Spec.InitContainers {
		containers[c.Name] = true
	}
	for i := range rules {
		errs = append(errs, validatePodFailurePolicyRule(spec, &rules[i], rulesPath.Index(i), containers)...)
	}
	return errs
}

func validatePodFailurePolicyRule(spec *batchv1.JobSpec, rule *batchv1.PodFailurePolicyRule, rulePath *field.Path, containers map[string]bool) field.ErrorList {
	var errs field.ErrorList
	actionPath := rulePath.Child("action")
	switch {
	case rule.Action == batchv1.PodFailurePolicyActionFailIndex && spec.BackoffLimitPerIndex == nil:
		errs = append(errs, field.Invalid(actionPath, rule.Action, "requires the backoffLimitPerIndex to be set"))
	case !contains(supportedPodFailurePolicyActions, rule.Action):
		errs = append(errs, field.NotSupported(actionPath, rule.Action, supportedPodFailurePolicyActions))
	}
	switch {
	case rule.OnExitCodes != nil && rule.OnPodConditions != nil:
		errs = append(errs, field.Invalid(rulePath, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
	case rule.OnExitCodes == nil && rule.OnPodConditions == nil:
		errs = append(errs, field.Invalid(rulePath, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
	case rule.OnExitCodes != nil:
		errs = append(errs, validateOnExitCodes(rule.OnExitCodes, rulePath.Child("onExitCodes"), containers)...)
	default:
		condsPath := rulePath.Child("onPodConditions")
		if len(rule.OnPodConditions) > maxPodFailurePolicyConditions {
			errs = append(errs, field.TooMany(condsPath, len(rule.OnPodConditions), maxPodFailurePolicyConditions))
		}
		statuses := []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionUnknown}
		for j, p := range rule.OnPodConditions {
			pPath := condsPath.Index(j)
			if !contains(statuses, p.Status) {
				errs = append(errs, field.NotSupported(pPath.Child("status"), p.Status, statuses))
			}
			errs = append(errs, validateQualifiedName(string(p.Type), pPath.Child("type"))...)
		}
	}
	return errs
}

func validateOnExitCodes(req *batchv1.PodFailurePolicyOnExitCodesRequirement, fldPath *field.Path, containers map[string]bool) field.ErrorList {
	var errs field.ErrorList
	if req.ContainerName != nil && !containers[*req.ContainerName] {
		errs = append(errs, field.Invalid(fldPath.Child("containerName"), *req.ContainerName,
			"must be one of the container or initContainer names in the pod template"))
	}
	ops := []batchv1.PodFailurePolicyOnExitCodesOperator{batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn}
	if !contains(ops, req.Operator) {
		errs = append(errs, field.NotSupported(fldPath.Child("operator"), req.Operator, ops))
	}
	valuesPath := fldPath.Child("values")
	switch {
	case len(req.Values) == 0:
		errs = append(errs, field.Invalid(valuesPath, req.Values, "at least one value is required"))
	case len(req.Values) > maxPodFailurePolicyExitCodes:
		errs = append(errs, field.TooMany(valuesPath, len(req.Values), maxPodFailurePolicyExitCodes))
	}
	seen := map[int32]bool{}
	for i, v := range req.Values {
		switch {
		case req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0:
			errs = append(errs, field.Invalid(valuesPath.Index(i), v, "must not be 0 for the In operator"))
		case seen[v]:
			errs = append(errs, field.Duplicate(valuesPath.Index(i), v))
		case i > 0 && req.Values[i-1] > v:
			errs = append(errs, field.Invalid(valuesPath.Index(i), v, "must be ordered"))
		}
		seen[v] = true
	}
	return errs
}

// validateSuccessPolicy is kube's: an Indexed Job's rules, each naming
// succeededIndexes within completions or a succeededCount, or both.
func validateSuccessPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		errs = append(errs, field.Invalid(fldPath, *spec.SuccessPolicy, "requires indexed completion mode"))
	}
	rules := spec.SuccessPolicy.Rules
	if len(rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if len(rules) > maxSuccessPolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	completions := int32(math.MaxInt32)
	if spec.Completions != nil {
		completions = *spec.Completions
	}
	for i, rule := range rules {
		rulePath := rulesPath.Index(i)
		if rule.SucceededCount == nil && rule.SucceededIndexes == nil {
			errs = append(errs, field.Required(rulePath, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var total int32
		if rule.SucceededIndexes != nil {
			idxPath := rulePath.Child("succeededIndexes")
			if len(*rule.SucceededIndexes) > maxSucceededIndexesLength {
				errs = append(errs, field.TooLong(idxPath, "", maxSucceededIndexesLength))
			}
			n, err := countJobIndexes(*rule.SucceededIndexes, completions)
			if err != nil {
				errs = append(errs, field.Invalid(idxPath, *rule.SucceededIndexes, "error parsing succeededIndexes: "+err.Error()))
			}
			total = n
		}
		if rule.SucceededCount != nil {
			countPath := rulePath.Child("succeededCount")
			n := *rule.SucceededCount
			if n < 0 {
				errs = append(errs, field.Invalid(countPath, n, "must be greater than or equal to 0"))
			}
			if n > completions {
				errs = append(errs, field.Invalid(countPath, n, fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if rule.SucceededIndexes != nil && n > total {
				errs = append(errs, field.Invalid(countPath, n, fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
			}
		}
	}
	return errs
}

// countJobIndexes parses a list of indexes and ranges ("1,3-5,7"), kube's
// format for completedIndexes, failedIndexes and succeededIndexes, and
// returns how many indexes it names. The intervals must be increasing,
// not overlap, and lie below completions.
func countJobIndexes(s string, completions int32) (int32, error) {
	if s == "" {
		return 0, nil
	}
	var total int32
	prev := int64(-1)
	for _, part := range strings.Split(s, ",") {
		lo, hi, err := parseIndexInterval(part)
		if err != nil {
			return 0, err
		}
		if hi >= int64(completions) {
			return 0, fmt.Errorf("too large index: %q", part)
		}
		if lo <= prev {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", prev, lo)
		}
		prev = hi
		total += int32(hi - lo + 1)
	}
	return total, nil
}

func parseIndexInterval(part string) (lo, hi int64, err error) {
	limits := strings.Split(part, "-")
	if len(limits) > 2 {
		return 0, 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", part)
	}
	if lo, err = strconv.ParseInt(limits[0], 10, 32); err != nil || lo < 0 {
		return 0, 0, fmt.Errorf("cannot convert string to integer for index: %q", limits[0])
	}
	hi = lo
	if len(limits) == 2 {
		if hi, err = strconv.ParseInt(limits[1], 10, 32); err != nil || hi < 0 {
			return 0, 0, fmt.Errorf("cannot convert string to integer for index: %q", limits[1])
		}
		if lo >= hi {
			return 0, 0, fmt.Errorf("the fragment %q violates the requirement that first index is less than the second", part)
		}
	}
	return lo, hi, nil
}

var supportedPodReplacementPolicies = []batchv1.PodReplacementPolicy{batchv1.Failed, batchv1.TerminatingOrFailed}

func validatePodReplacementPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	p := spec.PodReplacementPolicy
	switch {
	case p == nil:
		return nil
	case spec.PodFailurePolicy != nil && *p != batchv1.Failed:
		return field.ErrorList{field.NotSupported(fldPath, *p, []batchv1.PodReplacementPolicy{batchv1.Failed})}
	case !contains(supportedPodReplacementPolicies, *p):
		return field.ErrorList{field.NotSupported(fldPath, *p, supportedPodReplacementPolicies)}
	}
	return nil
}

// validateJobStatus checks what is cheap to check of the status: counts
// are never negative.
func validateJobStatus(status *batchv1.JobStatus, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, v := range map[string]int32{"active": status.Active, "succeeded": status.Succeeded, "failed": status.Failed} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v), fldPath.Child(name))...)
	}
	for name, v := range map[string]*int32{"ready": status.Ready, "terminating": status.Terminating} {
		if v != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*v), fldPath.Child(name))...)
		}
	}
	return errs
}

// validateJobUpdate is kube's ValidateJobSpecUpdate: the selector, the
// completion mode and the failure and success policies never change;
// completions change only for an Indexed Job, together with parallelism;
// the template changes only while a Job is suspended and has never
// started, and then only where the pods will be scheduled (node selector,
// affinity, tolerations, scheduling gates) and their labels and
// annotations.
func validateJobUpdate(job, old *batchv1.Job) field.ErrorList {
	specPath := field.NewPath("spec")
	spec, oldSpec := &job.Spec, &old.Spec
	var errs field.ErrorList
	errs = append(errs, validateJobCompletionsUpdate(spec, oldSpec, specPath.Child("completions"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(spec.Selector, oldSpec.Selector, specPath.Child("selector"))...)
	errs = append(errs, validateJobTemplateUpdate(job, old, specPath.Child("template"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(spec.CompletionMode, oldSpec.CompletionMode, specPath.Child("completionMode"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(spec.PodFailurePolicy, oldSpec.PodFailurePolicy, specPath.Child("podFailurePolicy"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(spec.BackoffLimitPerIndex, oldSpec.BackoffLimitPerIndex, specPath.Child("backoffLimitPerIndex"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(spec.ManagedBy, oldSpec.ManagedBy, specPath.Child("managedBy"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(spec.SuccessPolicy, oldSpec.SuccessPolicy, specPath.Child("successPolicy"))...)
	return errs
}

func validateJobCompletionsUpdate(spec, old *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if !indexed {
		return apivalidation.ValidateImmutableField(spec.Completions, old.Completions, fldPath)
	}
	if apiequality.Semantic.DeepEqual(spec.Completions, old.Completions) || spec.Completions == nil {
		return nil // nil is refused by validateJobSpec
	}
	if spec.Parallelism == nil || *spec.Completions != *spec.Parallelism {
		return field.ErrorList{field.Invalid(fldPath, *spec.Completions, "can only be modified in tandem with spec.parallelism")}
	}
	return nil
}

func validateJobTemplateUpdate(job, old *batchv1.Job, fldPath *field.Path) field.ErrorList {
	tmpl, oldTmpl := &job.Spec.Template, &old.Spec.Template
	if old.Spec.Suspend != nil && *old.Spec.Suspend && old.Status.StartTime == nil {
		// Only the scheduling directives, labels and annotations may move.
		cp := oldTmpl.DeepCopy()
		cp.Labels, cp.Annotations = tmpl.Labels, tmpl.Annotations
		cp.Spec.NodeSelector, cp.Spec.Affinity = tmpl.Spec.NodeSelector, tmpl.Spec.Affinity
		cp.Spec.Tolerations, cp.Spec.SchedulingGates = tmpl.Spec.Tolerations, tmpl.Spec.SchedulingGates
		oldTmpl = cp
	}
	return apivalidation.ValidateImmutableField(*tmpl, *oldTmpl, fldPath)
}

func jobFields(job *batchv1.Job) fields.Set {
	return fields.Set{"status.successful": strconv.Itoa(int(job.Status.Succeeded))}
}
