package app

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type leaderState struct{ v atomic.Bool }

func (l *leaderState) get() bool  { return l.v.Load() }
func (l *leaderState) set(b bool) { l.v.Store(b) }

func metav1ObjectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
