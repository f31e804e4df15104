// Fixture of tests/layers: optim/ stands on comm/ only, as it must. Never compiled.
#pragma once
#include "trainkit/comm/shared.hpp"
