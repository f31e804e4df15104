// Fixture of tests/layers: reduce/ includes optim/, which the check forbids (no cycle, so only
// the forbidden edge can fail it). Never compiled.
#pragma once
#include "trainkit/comm/shared.hpp"
#include "trainkit/optim/step.hpp"
