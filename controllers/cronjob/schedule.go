package cronjob

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// nextScheduleDelta is added to every wait for the next schedule time, so
// that the sync it wakes is past that time, not a hair before it.
const nextScheduleDelta = 100 * time.Millisecond

// tooManyMissed is how many missed start times a CronJob may have before
// the controller stops catching up and says so: more than a long weekend
// of an hourly schedule, fewer than a clock decades off.
const tooManyMissed = 100

// errNoGap is a schedule that parses but whose two next times coincide
// (day 31 of February).
var errNoGap = errors.New("time difference between two schedules is less than 1 second")

// unmet is what mostRecentScheduleTime finds between a CronJob's last
// schedule time (or its creation) and now.
type unmet struct {
	// earliest is when the search started: lastScheduleTime, creation, or
	// now - startingDeadlineSeconds if that is later.
	earliest time.Time
	// mostRecent is the latest schedule time in (earliest, now]; nil if
	// there is none.
	mostRecent *time.Time
	// missed is about how many schedule times fell in (earliest, now].
	missed int64
}

// mostRecentScheduleTime finds the latest time in (earliest, now] the
// schedule says a Job should have started, without walking every missed
// time: it estimates their number from the gap between the next two, and
// walks only the last ones. withDeadline moves earliest up to now -
// startingDeadlineSeconds: times older than that are not worth starting.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule, withDeadline bool) (unmet, error) {
	u := unmet{earliest: cj.CreationTimestamp.Time}
	if t := cj.Status.LastScheduleTime; t != nil {
		u.earliest = t.Time
	}
	if d := cj.Spec.StartingDeadlineSeconds; withDeadline && d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(u.earliest) {
			u.earliest = deadline
		}
	}
	t1 := sched.Next(u.earliest)
	t2 := sched.Next(t1)
	switch {
	case now.Before(t1):
		return u, nil
	case now.Before(t2):
		u.mostRecent, u.missed = &t1, 1
		return u, nil
	}
	gap := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if gap < 1 {
		return u, errNoGap
	}
	u.missed = int64(now.Sub(t1).Seconds())/gap + 1
	// Start two gaps before the estimated last time, so that irregular
	// schedules (30 6-16/4 * * 1-5) and @every land on their real times.
	var latest time.Time
	from := t1.Add(time.Duration((u.missed-2)*gap) * time.Second)
	for t := sched.Next(from); !t.After(now); t = sched.Next(t) {
		latest = t
	}
	if !latest.IsZero() {
		u.mostRecent = &latest
	}
	return u, nil
}

// nextScheduleDelay is how long until the sync after the next schedule
// time: from the last time met (or creation), or from now when times were
// missed, whatever startingDeadlineSeconds says.
func nextScheduleDelay(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) time.Duration {
	u, err := mostRecentScheduleTime(cj, now, sched, false)
	from := now
	switch {
	case err != nil:
	case u.mostRecent != nil:
		from = *u.mostRecent
	case u.missed == 0:
		from = u.earliest
	}
	return sched.Next(from).Add(nextScheduleDelta).Sub(now)
}

// jobName is the name of the Job for a schedule time: deterministic, so
// that a Job is never created twice for the same time, in minutes since the
// epoch, a CronJob's finest grain.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// jobFromTemplate is the Job cj starts for a schedule time: its template's
// labels, annotations and spec, the time it was scheduled for (in cj's time
// zone, UTC without one) and cj as its controller.
func jobFromTemplate(cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	loc := time.UTC
	if tz := cj.Spec.TimeZone; tz != nil {
		var err error
		if loc, err = time.LoadLocation(*tz); err != nil {
			return nil, err
		}
	}
	annotations := maps.Clone(cj.Spec.JobTemplate.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	labels := maps.Clone(cj.Spec.JobTemplate.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            jobName(cj, scheduled),
			Namespace:       cj.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&job.Spec)
	return job, nil
}

// jobRef is the reference status.active keeps to a Job.
func jobRef(job *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind: "Job", APIVersion: batchv1.SchemeGroupVersion.String(),
		Namespace: job.Namespace, Name: job.Name, UID: job.UID, ResourceVersion: job.ResourceVersion,
	}
}

// finished says whether a Job is over, and how: Complete or Failed, True.
func finished(job *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

func inActive(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func inActiveByName(cj *batchv1.CronJob, name string) bool {
	for _, r := range cj.Status.Active {
		if r.Name == name {
			return true
		}
	}
	return false
}

func removeActive(cj *batchv1.CronJob, uid types.UID) {
	active := cj.Status.Active[:0:0]
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			active = append(active, r)
		}
	}
	cj.Status.Active = active
}

// byStartTime orders Jobs oldest first: those with a start time by it, then
// those without; names break ties.
func byStartTime(a, b *batchv1.Job) int {
	as, bs := a.Status.StartTime, b.Status.StartTime
	switch {
	case as == nil && bs != nil:
		return 1
	case as != nil && bs == nil:
		return -1
	case as != nil && !as.Equal(bs):
		return as.Compare(bs.Time)
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}
