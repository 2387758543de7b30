package supervision_test

import (
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}
