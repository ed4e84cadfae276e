package api

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CronJobs (batch/v1): a Job stamped out of a template on a cron schedule.
// The cronjob controller names each Job "<cronjob>-<minutes since the
// epoch>", so a CronJob's name has room for 11 characters fewer than a
// Job's (63).

// cronJobMaxNameLength is a Job name's limit (a DNS-1035 label, 63) less
// the controller's 11-character suffix.
const cronJobMaxNameLength = 63 - 11

// parseCronSchedule parses a CronJob's schedule as kube does: the standard
// five fields (minute, hour, day of month, month, day of week) or a
// descriptor such as @hourly or @every 1h30m. A schedule prefixed with
// TZ= or CRON_TZ= is parsed in that time zone.
func parseCronSchedule(schedule string) (cron.Schedule, error) {
	return cron.ParseStandard(schedule)
}

// CronJobSchedule is the schedule a CronJob's Jobs are started on, as
// kube's controller reads it: its spec.schedule in its spec.timeZone, or in
// the controller's local time zone when that is unset. A schedule that
// names its zone itself (TZ=, CRON_TZ=) keeps it.
func CronJobSchedule(cj *batchv1.CronJob) (cron.Schedule, error) {
	schedule := cj.Spec.Schedule
	if tz := cj.Spec.TimeZone; tz != nil && !strings.Contains(schedule, "TZ") {
		if _, err := time.LoadLocation(*tz); err == nil {
			schedule = "TZ=" + *tz + " " + schedule
		}
	}
	return parseCronSchedule(schedule)
}

// defaultCronJob is kube's SetDefaults_CronJob: Jobs may run concurrently,
// the CronJob is not suspended, and 3 succeeded and 1 failed Job are kept.
// The job template's pod spec gets a pod's defaults; its Job spec gets
// none (the Job's own defaults apply when the Job is created).
func defaultCronJob(cj *batchv1.CronJob) {
	spec := &cj.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if spec.Suspend == nil {
		spec.Suspend = ptrTo(false)
	}
	if spec.SuccessfulJobsHistoryLimit == nil {
		spec.SuccessfulJobsHistoryLimit = ptrTo(int32(3))
	}
	if spec.FailedJobsHistoryLimit == nil {
		spec.FailedJobsHistoryLimit = ptrTo(int32(1))
	}
	defaultPodSpec(&spec.JobTemplate.Spec.Template.Spec)
}

// validateCronJobObject is kube's ValidateCronJobCreate (old nil) and
// ValidateCronJobUpdate: the name fits the Jobs' names (on create only, so
// that an older, longer-named CronJob may still be updated), then the
// spec.
func validateCronJobObject(obj, old Object) field.ErrorList {
	cj := obj.(*batchv1.CronJob)
	var oldSpec *batchv1.CronJobSpec
	var errs field.ErrorList
	if old != nil {
		oldSpec = &old.(*batchv1.CronJob).Spec
	} else if len(cj.Name) > cronJobMaxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), cj.Name,
			fmt.Sprintf("must be no more than %d characters", cronJobMaxNameLength)))
	}
	return append(errs, validateCronJobSpec(&cj.Spec, oldSpec, field.NewPath("spec"))...)
}

// validateCronJobSpec is kube's validateCronJobSpec. A schedule may name
// its own time zone (TZ=) only if it did already before an update.
func validateCronJobSpec(spec, oldSpec *batchv1.CronJobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Schedule == "" {
		errs = append(errs, field.Required(fldPath.Child("schedule"), ""))
	} else {
		allowTZ := oldSpec != nil && strings.Contains(oldSpec.Schedule, "TZ")
		errs = append(errs, validateCronSchedule(spec.Schedule, allowTZ, spec.TimeZone, fldPath.Child("schedule"))...)
	}
	if spec.StartingDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.StartingDeadlineSeconds, fldPath.Child("startingDeadlineSeconds"))...)
	}
	if oldSpec == nil || deref(oldSpec.TimeZone) != deref(spec.TimeZone) || (oldSpec.TimeZone == nil) != (spec.TimeZone == nil) {
		errs = append(errs, validateCronJobTimeZone(spec.TimeZone, fldPath.Child("timeZone"))...)
	}
	cpPath := fldPath.Child("concurrencyPolicy")
	switch spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		errs = append(errs, field.Required(cpPath, ""))
	default:
		errs = append(errs, field.NotSupported(cpPath, spec.ConcurrencyPolicy,
			[]batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}))
	}
	errs = append(errs, validateCronJobTemplate(&spec.JobTemplate, fldPath.Child("jobTemplate"))...)
	if spec.SuccessfulJobsHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.SuccessfulJobsHistoryLimit), fldPath.Child("successfulJobsHistoryLimit"))...)
	}
	if spec.FailedJobsHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.FailedJobsHistoryLimit), fldPath.Child("failedJobsHistoryLimit"))...)
	}
	return errs
}

// validateCronSchedule is kube's validateScheduleFormat: the parser's
// complaint, and a time zone named in the schedule rather than in
// spec.timeZone.
func validateCronSchedule(schedule string, allowTZ bool, timeZone *string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := parseCronSchedule(schedule); err != nil {
		errs = append(errs, field.Invalid(fldPath, schedule, err.Error()))
	}
	switch {
	case allowTZ && strings.Contains(schedule, "TZ") && timeZone != nil:
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	case !allowTZ && strings.Contains(schedule, "TZ"):
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

// timeZoneComponent is what one '/'-separated part of an IANA time zone
// name may be (https://data.iana.org/time-zones/theory.html#naming), with
// digits and '+' tolerated for the legacy names.
var timeZoneComponent = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// validateCronJobTimeZone is kube's validateTimeZone: unset, or an
// explicit IANA name this process's time zone database knows.
func validateCronJobTimeZone(tz *string, fldPath *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(fldPath, *tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !timeZoneComponent.MatchString(part) {
			return field.ErrorList{field.Invalid(fldPath, *tz, "unknown time zone "+*tz)}
		}
	}
	var errs field.ErrorList
	if strings.EqualFold(*tz, "Local") {
		errs = append(errs, field.Invalid(fldPath, *tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		errs = append(errs, field.Invalid(fldPath, *tz, err.Error()))
	}
	return errs
}

// validateCronJobTemplate is kube's ValidateJobTemplateSpec: the template
// is a Job's spec but for the selector, which every Job created from it
// has generated.
func validateCronJobTemplate(tmpl *batchv1.JobTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := validateLabels(tmpl.Labels, fldPath.Child("metadata", "labels"))
	errs = append(errs, validateAnnotations(tmpl.Annotations, fldPath.Child("metadata", "annotations"))...)
	specPath := fldPath.Child("spec")
	spec := &tmpl.Spec
	for _, f := range []struct {
		name string
		v    *int32
	}{{"parallelism", spec.Parallelism}, {"completions", spec.Completions}, {"backoffLimit", spec.BackoffLimit}, {"ttlSecondsAfterFinished", spec.TTLSecondsAfterFinished}} {
		if f.v != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*f.v), specPath.Child(f.name))...)
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.ActiveDeadlineSeconds, specPath.Child("activeDeadlineSeconds"))...)
	}
	if mode := spec.CompletionMode; mode != nil {
		switch *mode {
		case batchv1.NonIndexedCompletion:
		case batchv1.IndexedCompletion:
			if spec.Completions == nil {
				errs = append(errs, field.Required(specPath.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
			}
		default:
			errs = append(errs, field.NotSupported(specPath.Child("completionMode"), *mode,
				[]batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
		}
	}
	podPath := specPath.Child("template")
	errs = append(errs, validateLabels(spec.Template.Labels, podPath.Child("metadata", "labels"))...)
	errs = append(errs, validateAnnotations(spec.Template.Annotations, podPath.Child("metadata", "annotations"))...)
	errs = append(errs, validatePodSpec(&spec.Template.Spec, podPath.Child("spec"))...)
	if p := spec.Template.Spec.RestartPolicy; p != corev1.RestartPolicyOnFailure && p != corev1.RestartPolicyNever {
		errs = append(errs, field.NotSupported(podPath.Child("spec", "restartPolicy"), p,
			[]corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	if spec.Selector != nil {
		errs = append(errs, field.Invalid(specPath.Child("selector"), spec.Selector, "`selector` will be auto-generated"))
	}
	if spec.ManualSelector != nil && *spec.ManualSelector {
		errs = append(errs, field.NotSupported(specPath.Child("manualSelector"), spec.ManualSelector, []string{"nil", "false"}))
	}
	return errs
}

// cronJobTable is kube-apiserver's printer for CronJobs.
var cronJobTable = printer([]metav1.TableColumnDefinition{
	nameColumn,
	{Name: "Schedule", Type: "string", Description: batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]},
	{Name: "Timezone", Type: "string", Description: batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]},
	{Name: "Suspend", Type: "boolean", Description: batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]},
	{Name: "Active", Type: "integer", Description: batchv1.CronJobStatus{}.SwaggerDoc()["active"]},
	{Name: "Last Schedule", Type: "string", Description: batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]},
	ageColumn, containersColumn, imagesColumn,
	{Name: "Selector", Type: "string", Priority: 1, Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
}, func(cj *batchv1.CronJob, now time.Time) []any {
	lastSchedule := "<none>"
	if t := cj.Status.LastScheduleTime; t != nil {
		lastSchedule = age(*t, now)
	}
	suspend := "<unset>"
	if s := cj.Spec.Suspend; s != nil {
		suspend = "False"
		if *s {
			suspend = "True"
		}
	}
	names, images := containerCells(cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
	return []any{
		cj.Name, cj.Spec.Schedule, orNone(deref(cj.Spec.TimeZone)), suspend, int64(len(cj.Status.Active)),
		lastSchedule, age(cj.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(cj.Spec.JobTemplate.Spec.Selector),
	}
})

// A new CronJob starts at generation 1 with an empty status; an update
// keeps the status and bumps the generation when the spec changed.

func prepareCronJobForCreate(cj *batchv1.CronJob) {
	cj.Generation = 1
	cj.Status = batchv1.CronJobStatus{}
}

func prepareCronJobForUpdate(cj, old *batchv1.CronJob) {
	cj.Status = old.Status
	cj.Generation = nextGeneration(old, cj.Spec, old.Spec)
}
