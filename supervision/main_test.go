package supervision_test

import (
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.LeakOptions()...)
}
