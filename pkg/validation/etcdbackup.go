package validation

import (
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ValidateEtcdBackup checks spec.etcdBackup.schedule as the controller reads it (cron's
// standard five fields or a descriptor): the CRD's pattern admits the shape, not the values
// (a minute of 61, a day of the week of 8).
func ValidateEtcdBackup(p *bpav1.Provisioning) field.ErrorList {
	b := p.Spec.EtcdBackup
	if b == nil || b.Schedule == "" {
		return nil
	}
	path := field.NewPath("spec", "etcdBackup", "schedule")
	sched, err := cron.ParseStandard(b.Schedule)
	if err != nil {
		return field.ErrorList{field.Invalid(path, b.Schedule, err.Error())}
	}
	if NeverFires(sched) {
		return field.ErrorList{field.Invalid(path, b.Schedule, "never fires (a day that no month has, such as February 30)")}
	}
	return nil
}

// NeverFires says whether a parsed schedule has no next time within the next five years
// (cron's Next gives the zero time then).
func NeverFires(s cron.Schedule) bool {
	return s.Next(time.Now()).IsZero()
}
