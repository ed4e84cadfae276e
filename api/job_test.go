package api

import (
	"math"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// createdJob is a Job as the API server makes it from a user's minimal
// one: defaulted, then prepared for create with a uid.
func createdJob(mutate func(job *batchv1.Job)) *batchv1.Job {
	tmpl := webTemplate()
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: types.UID("0c1b7a5e-0000-4000-8000-000000000001")},
		Spec:       batchv1.JobSpec{Template: tmpl},
	}
	if mutate != nil {
		mutate(job)
	}
	Jobs.Default(job)
	Jobs.PrepareForCreate(job)
	return job
}

func TestDefaultJob(t *testing.T) {
	job := createdJob(nil)
	spec := job.Spec
	if deref(spec.Completions) != 1 || deref(spec.Parallelism) != 1 || deref(spec.BackoffLimit) != 6 {
		t.Errorf("completions %v parallelism %v backoffLimit %v, want 1 1 6", spec.Completions, spec.Parallelism, spec.BackoffLimit)
	}
	if deref(spec.CompletionMode) != batchv1.NonIndexedCompletion || spec.Suspend == nil || *spec.Suspend {
		t.Errorf("completionMode %v suspend %v, want NonIndexed false", spec.CompletionMode, spec.Suspend)
	}
	if deref(spec.PodReplacementPolicy) != batchv1.TerminatingOrFailed {
		t.Errorf("podReplacementPolicy %v, want TerminatingOrFailed", spec.PodReplacementPolicy)
	}
	uid := string(job.UID)
	wantLabels := map[string]string{"app": "web", JobControllerUIDLabel: uid, JobNameLabel: "pi", "controller-uid": uid, "job-name": "pi"}
	if !reflect.DeepEqual(spec.Template.Labels, wantLabels) {
		t.Errorf("template labels %v, want %v", spec.Template.Labels, wantLabels)
	}
	if !reflect.DeepEqual(job.Labels, wantLabels) {
		t.Errorf("labels %v, want the template's, generated ones included: %v", job.Labels, wantLabels)
	}
	if want := map[string]string{JobControllerUIDLabel: uid}; !reflect.DeepEqual(spec.Selector.MatchLabels, want) {
		t.Errorf("selector %v, want %v", spec.Selector.MatchLabels, want)
	}
	if spec.ManualSelector != nil {
		t.Errorf("manualSelector = %v, want unset", *spec.ManualSelector)
	}
	checkErrors(t, Jobs.Validate(job))

	t.Run("parallelism alone leaves completions unset: a work queue", func(t *testing.T) {
		job := createdJob(func(j *batchv1.Job) { j.Spec.Parallelism = ptrTo(int32(3)) })
		if job.Spec.Completions != nil || *job.Spec.Parallelism != 3 {
			t.Errorf("completions %v parallelism %d, want unset and 3", job.Spec.Completions, *job.Spec.Parallelism)
		}
	})
	t.Run("completions alone defaults parallelism to 1", func(t *testing.T) {
		job := createdJob(func(j *batchv1.Job) { j.Spec.Completions = ptrTo(int32(5)) })
		if *job.Spec.Completions != 5 || *job.Spec.Parallelism != 1 {
			t.Errorf("completions %d parallelism %d, want 5 and 1", *job.Spec.Completions, *job.Spec.Parallelism)
		}
	})
	t.Run("backoffLimitPerIndex makes backoffLimit unlimited", func(t *testing.T) {
		job := createdJob(func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
			j.Spec.Completions = ptrTo(int32(3))
			j.Spec.BackoffLimitPerIndex = ptrTo(int32(1))
		})
		if *job.Spec.BackoffLimit != math.MaxInt32 {
			t.Errorf("backoffLimit %d, want MaxInt32", *job.Spec.BackoffLimit)
		}
		checkErrors(t, Jobs.Validate(job))
	})
	t.Run("a pod failure policy: Failed replacement, condition status True", func(t *testing.T) {
		job := createdJob(func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}},
			}}}
		})
		if deref(job.Spec.PodReplacementPolicy) != batchv1.Failed {
			t.Errorf("podReplacementPolicy %v, want Failed", job.Spec.PodReplacementPolicy)
		}
		if s := job.Spec.PodFailurePolicy.Rules[0].OnPodConditions[0].Status; s != corev1.ConditionTrue {
			t.Errorf("pattern status %q, want True", s)
		}
		checkErrors(t, Jobs.Validate(job))
	})
	t.Run("labels of its own stay", func(t *testing.T) {
		job := createdJob(func(j *batchv1.Job) { j.Labels = map[string]string{"team": "a"} })
		if !reflect.DeepEqual(job.Labels, map[string]string{"team": "a"}) {
			t.Errorf("labels %v, want team=a only", job.Labels)
		}
	})
	t.Run("a manual selector is kept as given", func(t *testing.T) {
		job := createdJob(func(j *batchv1.Job) {
			j.Spec.ManualSelector = ptrTo(true)
			j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		})
		if len(job.Spec.Template.Labels) != 1 || len(job.Spec.Selector.MatchLabels) != 1 {
			t.Errorf("labels %v selector %v, want them untouched", job.Spec.Template.Labels, job.Spec.Selector)
		}
		checkErrors(t, Jobs.Validate(job))
	})
}

func TestValidateJob(t *testing.T) {
	exitCodes := func(op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) *batchv1.PodFailurePolicy {
		return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values},
		}}}
	}
	indexed := func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		j.Spec.Completions = ptrTo(int32(5))
	}
	tests := []struct {
		name   string
		before func(j *batchv1.Job) // before defaulting
		after  func(j *batchv1.Job) // after create's preparation
		want   []string
	}{
		{"valid", nil, nil, nil},
		{"negative parallelism", nil, func(j *batchv1.Job) { j.Spec.Parallelism = ptrTo(int32(-1)) },
			[]string{"spec.parallelism: Invalid value"}},
		{"negative completions and backoffLimit", nil, func(j *batchv1.Job) {
			j.Spec.Completions = ptrTo(int32(-1))
			j.Spec.BackoffLimit = ptrTo(int32(-2))
		}, []string{"spec.backoffLimit: Invalid value", "spec.completions: Invalid value"}},
		{"negative activeDeadlineSeconds and ttl", nil, func(j *batchv1.Job) {
			j.Spec.ActiveDeadlineSeconds = ptrTo(int64(-1))
			j.Spec.TTLSecondsAfterFinished = ptrTo(int32(-1))
		}, []string{"spec.activeDeadlineSeconds: Invalid value", "spec.ttlSecondsAfterFinished: Invalid value"}},
		{"restartPolicy unset (Always)", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = "" }, nil,
			[]string{"spec.template.spec.restartPolicy: Required value"}},
		{"restartPolicy OnFailure", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }, nil, nil},
		{"restartPolicy OnFailure with a pod failure policy", func(j *batchv1.Job) {
			j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			j.Spec.PodFailurePolicy = exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 42)
		}, nil, []string{"spec.template.spec.restartPolicy: Invalid value"}},
		{"backoffLimitPerIndex without Indexed", func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptrTo(int32(1)) }, nil,
			[]string{"spec.backoffLimitPerIndex: Invalid value"}},
		{"maxFailedIndexes without backoffLimitPerIndex", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.MaxFailedIndexes = ptrTo(int32(1))
		}, nil, []string{"spec.backoffLimitPerIndex: Required value"}},
		{"maxFailedIndexes above completions", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.BackoffLimitPerIndex = ptrTo(int32(1))
			j.Spec.MaxFailedIndexes = ptrTo(int32(6))
		}, nil, []string{"spec.maxFailedIndexes: Invalid value"}},
		{"Indexed without completions", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
			j.Spec.Parallelism = ptrTo(int32(2))
		}, nil, []string{"spec.completions: Required value"}},
		{"unknown completion mode", func(j *batchv1.Job) { j.Spec.CompletionMode = ptrTo(batchv1.CompletionMode("Sometimes")) }, nil,
			[]string{"spec.completionMode: Unsupported value"}},
		{"exit code 0 with In, unordered and duplicate values", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 0, 5, 3, 3)
		}, nil, []string{
			"spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value",
			"spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Invalid value",
			"spec.podFailurePolicy.rules[0].onExitCodes.values[3]: Duplicate value",
		}},
		{"a rule with neither requirement, and an unknown action", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: "Retry"}}}
		}, nil, []string{"spec.podFailurePolicy.rules[0]: Invalid value", "spec.podFailurePolicy.rules[0].action: Unsupported value"}},
		{"FailIndex without backoffLimitPerIndex", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 42)
			j.Spec.PodFailurePolicy.Rules[0].Action = batchv1.PodFailurePolicyActionFailIndex
		}, nil, []string{"spec.podFailurePolicy.rules[0].action: Invalid value"}},
		{"exit codes of a container the template lacks", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = exitCodes(batchv1.PodFailurePolicyOnExitCodesOpNotIn, 1)
			j.Spec.PodFailurePolicy.Rules[0].OnExitCodes.ContainerName = ptrTo("sidecar")
		}, nil, []string{"spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value"}},
		{"podReplacementPolicy TerminatingOrFailed with a pod failure policy", func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = exitCodes(batchv1.PodFailurePolicyOnExitCodesOpIn, 42)
			j.Spec.PodReplacementPolicy = ptrTo(batchv1.TerminatingOrFailed)
		}, nil, []string{"spec.podReplacementPolicy: Unsupported value"}},
		{"successPolicy of a NonIndexed Job", func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptrTo(int32(1))}}}
		}, nil, []string{"spec.successPolicy: Invalid value"}},
		{"successPolicy rules: empty, beyond completions, badly ordered", func(j *batchv1.Job) {
			indexed(j)
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{
				{},
				{SucceededCount: ptrTo(int32(6))},
				{SucceededIndexes: ptrTo("3,1")},
				{SucceededIndexes: ptrTo("0-2"), SucceededCount: ptrTo(int32(4))},
				{SucceededIndexes: ptrTo("0,2-4"), SucceededCount: ptrTo(int32(4))},
			}}
		}, nil, []string{
			"spec.successPolicy.rules[0]: Required value",
			"spec.successPolicy.rules[1].succeededCount: Invalid value",
			"spec.successPolicy.rules[2].succeededIndexes: Invalid value",
			"spec.successPolicy.rules[3].succeededCount: Invalid value",
		}},
		{"a generated selector changed", nil, func(j *batchv1.Job) {
			j.Spec.Selector.MatchLabels[JobControllerUIDLabel] = "someone-else"
		}, []string{"spec.selector: Invalid value", "spec.template.metadata.labels: Invalid value"}},
		{"a generated label set by hand to another value", func(j *batchv1.Job) {
			j.Spec.Template.Labels[JobNameLabel] = "other"
		}, nil, []string{"spec.template.metadata.labels[batch.kubernetes.io/job-name]: Invalid value"}},
		{"manual selector missing", func(j *batchv1.Job) { j.Spec.ManualSelector = ptrTo(true) }, nil,
			[]string{"spec.selector: Required value"}},
		{"negative status counts", nil, func(j *batchv1.Job) { j.Status.Active = -1 },
			[]string{"status.active: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := createdJob(tt.before)
			if tt.after != nil {
				tt.after(job)
			}
			checkErrors(t, Jobs.Validate(job), tt.want...)
		})
	}
}

func TestValidateJobUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(j *batchv1.Job)
		update func(j *batchv1.Job)
		want   []string
	}{
		{"parallelism may change", nil, func(j *batchv1.Job) { j.Spec.Parallelism = ptrTo(int32(4)) }, nil},
		{"suspend may change", nil, func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) }, nil},
		{"completions of a NonIndexed Job may not", nil, func(j *batchv1.Job) { j.Spec.Completions = ptrTo(int32(2)) },
			[]string{"spec.completions: Invalid value"}},
		{"completions of an Indexed Job move with parallelism", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		}, func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptrTo(int32(3)), ptrTo(int32(3))
		}, nil},
		{"completions of an Indexed Job alone may not", func(j *batchv1.Job) {
			j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion)
		}, func(j *batchv1.Job) { j.Spec.Completions = ptrTo(int32(3)) },
			[]string{"spec.completions: Invalid value"}},
		{"the template of a started Job may not", nil, func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "nginx:2" },
			[]string{"spec.template: Invalid value"}},
		{"the node selector of a suspended, never started Job may", func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) },
			func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"zone": "a"} }, nil},
		{"its image may not", func(j *batchv1.Job) { j.Spec.Suspend = ptrTo(true) },
			func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "nginx:2" },
			[]string{"spec.template: Invalid value"}},
		{"the completion mode may not", nil, func(j *batchv1.Job) { j.Spec.CompletionMode = ptrTo(batchv1.IndexedCompletion) },
			[]string{"spec.completionMode: Invalid value"}},
		{"the selector may not", nil, func(j *batchv1.Job) { j.Spec.Selector.MatchLabels["extra"] = "x" },
			[]string{"spec.selector: Invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := createdJob(tt.old)
			if old.Spec.Suspend == nil || !*old.Spec.Suspend {
				old.Status.StartTime = &metav1.Time{Time: time.Now()}
			}
			job := old.DeepCopy()
			tt.update(job)
			checkErrors(t, Jobs.ValidateUpdate(job, old), tt.want...)
		})
	}
}

func TestJobRows(t *testing.T) {
	start := metav1.NewTime(tableNow.Add(-90 * time.Second))
	end := metav1.NewTime(start.Add(42 * time.Second))
	job := func(mutate func(j *batchv1.Job)) *batchv1.Job {
		j := createdJob(func(j *batchv1.Job) { j.Spec.Completions = ptrTo(int32(3)) })
		j.CreationTimestamp = ago(2 * time.Minute)
		mutate(j)
		return j
	}
	cond := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue}
	}
	tests := []struct {
		name string
		job  *batchv1.Job
		want []any // STATUS COMPLETIONS DURATION
	}{
		{"not started", job(func(j *batchv1.Job) {}), []any{"Running", "0/3", ""}},
		{"running", job(func(j *batchv1.Job) { j.Status.StartTime, j.Status.Succeeded = &start, 1 }), []any{"Running", "1/3", "90s"}},
		{"complete", job(func(j *batchv1.Job) {
			j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &start, &end, 3
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}
		}), []any{"Complete", "3/3", "42s"}},
		{"failed", job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget), cond(batchv1.JobFailed)}
		}), []any{"Failed", "0/3", ""}},
		{"failure target", job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget)}
		}), []any{"FailureTarget", "0/3", ""}},
		{"suspended", job(func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuspended)}
		}), []any{"Suspended", "0/3", ""}},
		{"a work queue", job(func(j *batchv1.Job) { j.Spec.Completions, j.Spec.Parallelism = nil, ptrTo(int32(4)) }),
			[]any{"Running", "0/1 of 4", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := Jobs.TableRow(tt.job, tableNow)
			if got := row.Cells[1:4]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("STATUS COMPLETIONS DURATION = %v, want %v", got, tt.want)
			}
			if row.Cells[0] != "pi" || row.Cells[4] != "2m" || row.Cells[5] != "app" || row.Cells[6] != "nginx:1.27" {
				t.Errorf("NAME AGE CONTAINERS IMAGES = %v %v %v %v, want pi 2m app nginx:1.27", row.Cells[0], row.Cells[4], row.Cells[5], row.Cells[6])
			}
			if want := JobControllerUIDLabel + "=" + string(tt.job.UID); row.Cells[7] != want {
				t.Errorf("SELECTOR = %v, want %v", row.Cells[7], want)
			}
		})
	}
	names := []string{}
	for _, c := range Jobs.TableColumns() {
		names = append(names, c.Name)
	}
	if want := []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"}; !reflect.DeepEqual(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	if !FieldLabelSupported(Jobs, "status.successful") {
		t.Error("status.successful is not a field label of jobs")
	}
	if got := Jobs.SelectableFields(job(func(j *batchv1.Job) { j.Status.Succeeded = 2 }))["status.successful"]; got != "2" {
		t.Errorf("status.successful = %q, want 2", got)
	}
}
