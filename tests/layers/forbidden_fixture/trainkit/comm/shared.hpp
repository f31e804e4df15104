// Fixture of tests/layers: the layer optim/ and reduce/ share. Never compiled.
#pragma once
