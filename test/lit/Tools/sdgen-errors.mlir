// Bad presets and overrides: one clear error naming the value, exit code 1,
// and nothing on stdout.
// RUN: not sdgen 2>&1 | FileCheck %s --check-prefix=NOPRESET
// RUN: not sdgen --preset=dit-xs 2>&1 | FileCheck %s --check-prefix=PRESET
// RUN: not sdgen --preset=dit-s2 --heads=5 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not sdgen --preset=dit-s2 --depth=0 2>&1 | FileCheck %s --check-prefix=DEPTH
// RUN: not sdgen --preset=dit-s2 --hidden=-4 2>&1 | FileCheck %s --check-prefix=HIDDEN
// RUN: not sdgen --preset=dit-s2 --hidden=66 --heads=6 2>&1 | FileCheck %s --check-prefix=POSEMBED
// RUN: not sdgen --preset=flux-dev --hidden=3069 --heads=3 2>&1 | FileCheck %s --check-prefix=ROPE
// RUN: not sdgen --preset=dit-s2 --latent-size=33 2>&1 | FileCheck %s --check-prefix=LATENT
// RUN: not sdgen --preset=dit-s2 --mlp-ratio=0 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not sdgen --preset=dit-s2 --batch=0 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not sdgen --preset=dit-s2 --dtype=f16 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not sdgen --preset=dit-s2 --prediction-type=sample 2>&1 | FileCheck %s --check-prefix=PREDICTION
// RUN: not sdgen --preset=dit-s2 --loss=v 2>&1 | FileCheck %s --check-prefix=LOSS
// RUN: not sdgen --preset=dit-s2 --frames=9 2>&1 | FileCheck %s --check-prefix=FRAMES-DIT
// RUN: not sdgen --preset=dit-s2 --height=256 2>&1 | FileCheck %s --check-prefix=HEIGHT-DIT
// RUN: not sdgen --preset=dit-s2 --text-length=4 2>&1 | FileCheck %s --check-prefix=TEXT-DIT
// RUN: not sdgen --preset=wan2.1-14b --frames=80 2>&1 | FileCheck %s --check-prefix=FRAMES
// RUN: not sdgen --preset=wan2.1-14b --height=100 2>&1 | FileCheck %s --check-prefix=HEIGHT
// RUN: not sdgen --preset=wan2.1-14b --latent-size=32 2>&1 | FileCheck %s --check-prefix=LATENT-WAN
// RUN: not sdgen --preset=wan-long --latent-size=32 2>&1 | FileCheck %s --check-prefix=LATENT-WAN-LONG
// RUN: not sdgen --preset=flux-dev --latent-size=64 --width=512 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not sdgen --preset=flux-dev --text-length=0 2>&1 | FileCheck %s --check-prefix=TEXT
// Nothing reaches stdout, and the exit code is exactly 1.
// RUN: not sdgen --preset=dit-s2 --heads=5 2>/dev/null | count 0
// RUN: %python -c "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:], capture_output=True).returncode != 1)" sdgen --preset=dit-s2 --latent-size=33

// NOPRESET: sdgen: error: give --preset=NAME (dit-tiny, dit-digits, dit-s2, dit-b2, dit-xl2, wan2.1-14b, wan2.1-1.3b, wan-long, flux-dev, sd2-base, sdxl, unet-tiny, sdxl-tiny)
// PRESET: sdgen: error: unknown preset 'dit-xs'; expected one of dit-tiny, dit-digits, dit-s2, dit-b2, dit-xl2, wan2.1-14b, wan2.1-1.3b, wan-long, flux-dev
// HEADS: sdgen: error: hidden size 384 is not divisible by 5 heads
// DEPTH: sdgen: error: depth 0 must be positive
// HIDDEN: sdgen: error: hidden size -4 must be positive
// POSEMBED: sdgen: error: hidden size 66 must be a multiple of 4 (the 2-D sin-cos position embedding)
// ROPE: sdgen: error: head dimension 1023 (hidden 3069 / 3 heads) must be even for the rotary embedding
// LATENT: sdgen: error: latent size 33 is not divisible by the patch size 2
// RATIO: sdgen: error: mlp ratio 0 must be positive
// BATCH: sdgen: error: batch 0 must be positive
// DTYPE: sdgen: error: unknown --dtype 'f16'; expected f32 or bf16
// PREDICTION: sdgen: error: unknown --prediction-type 'sample'; expected epsilon, v_prediction or flow
// LOSS: sdgen: error: unknown --prediction-type 'v'; expected epsilon, v_prediction or flow
// FRAMES-DIT: sdgen: error: --frames applies to video models (wan2.1-14b, wan2.1-1.3b, wan-long) only
// HEIGHT-DIT: sdgen: error: --height and --width (pixels) apply to wan2.1-14b, wan2.1-1.3b, wan-long and flux-dev; give DiT --latent-size
// TEXT-DIT: sdgen: error: --text-length applies to text-conditioned models (wan2.1-14b, wan2.1-1.3b, wan-long, flux-dev)
// FRAMES: sdgen: error: frames 80 must be 4k+1 (the VAE keeps the first frame and compresses time by 4)
// HEIGHT: sdgen: error: height 100 must be a positive multiple of 16 (VAE factor 8 × patch 2)
// LATENT-WAN: sdgen: error: --latent-size applies to image models; give wan2.1-14b --frames, --height and --width
// LATENT-WAN-LONG: sdgen: error: --latent-size applies to image models; give wan-long --frames, --height and --width
// BOTH: sdgen: error: give --latent-size or --height/--width, not both
// TEXT: sdgen: error: text length 0 must be positive

// --classes shapes a DiT's labels only; the conditioning widths apply to
// the families that have them.
// RUN: not sdgen --preset=wan-long --classes=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLASSES-WAN
// CLASSES-WAN: sdgen: error: --classes applies to DiT models
// RUN: not sdgen --preset=dit-tiny --text-dim=32 -o /dev/null 2>&1 | FileCheck %s --check-prefix=TEXT-DIM-DIT
// TEXT-DIM-DIT: sdgen: error: --text-dim and --pooled-dim apply to text-conditioned models (wan2.1-14b, wan2.1-1.3b, wan-long, flux-dev)
// RUN: not sdgen --preset=wan-long --pooled-dim=32 -o /dev/null 2>&1 | FileCheck %s --check-prefix=POOLED-WAN
// POOLED-WAN: sdgen: error: --pooled-dim applies to Flux and SDXL (their pooled text vector)
// RUN: not sdgen --preset=wan-long --freq-dim=33 -o /dev/null 2>&1 | FileCheck %s --check-prefix=FREQ
// FREQ: sdgen: error: timestep-embedding width 33 must be even (cos and sin halves)
// RUN: not sdgen --preset=flux-dev --text-dim=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=TEXT-ZERO
// TEXT-ZERO: sdgen: error: text width 0 must be 1 to 1048576
// RUN: not sdgen --preset=dit-tiny --single-depth=2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=SINGLE
// SINGLE: sdgen: error: --single-depth applies to Flux (its single-stream blocks)
// RUN: not sdgen --preset=wan-long --ffn-dim=64 --mlp-ratio=2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=FFN-BOTH
// FFN-BOTH: sdgen: error: give --mlp-ratio or --ffn-dim, not both
// RUN: not sdgen --preset=wan-long --ffn-dim=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=FFN-ZERO
// FFN-ZERO: sdgen: error: FFN width 0 must be positive
// RUN: not sdgen --preset=dit-digits --classes=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLASSES
// CLASSES: sdgen: error: 0 classes: give 1 to 100000
// RUN: not sdgen --preset=dit-digits --channels=65 -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHANNELS
// CHANNELS: sdgen: error: 65 channels: give 1 to 64

// UNets: each list has one entry per level, the channels divide into the
// groups and the heads, and the latent halves at every level.
// RUN: not sdgen --preset=unet-tiny --block-channels=32,64,128 -o /dev/null 2>&1 | FileCheck %s --check-prefix=LEVELS
// LEVELS: sdgen: error: --block-channels [32, 64, 128] has 3 levels, but --attention-heads [2, 4] and --transformer-layers [1, 1] must have one entry per level
// RUN: not sdgen --preset=sd2-base --norm-groups=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=GROUPS
// GROUPS: sdgen: error: level 0's 320 channels are not divisible into 3 norm groups (--norm-groups)
// RUN: not sdgen --preset=sdxl --attention-heads=5,10,7 -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNET-HEADS
// UNET-HEADS: sdgen: error: level 2's 1280 channels are not divisible by 7 attention heads (--attention-heads)
// RUN: not sdgen --preset=sd2-base --latent-size=36 -o /dev/null 2>&1 | FileCheck %s --check-prefix=HALVES
// HALVES: sdgen: error: latent 36×36 does not halve evenly 3 times: with 4 levels, its height and width must be multiples of 8
// RUN: not sdgen --preset=unet-tiny --transformer-layers=1,0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=LAYERS
// LAYERS: sdgen: error: level 1's 0 transformer layers: give 1 to 64 (--transformer-layers)
// RUN: not sdgen --preset=sdxl --hidden=64 -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNET-HIDDEN
// UNET-HIDDEN: sdgen: error: --depth, --hidden, --heads, --mlp-ratio, --ffn-dim, --single-depth and --freq-dim apply to transformers; give sdxl --block-channels, --attention-heads, --transformer-layers and --layers-per-block
// RUN: not sdgen --preset=dit-s2 --layers-per-block=1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOT-UNET
// NOT-UNET: sdgen: error: --block-channels, --attention-heads, --transformer-layers, --layers-per-block and --norm-groups apply to UNets (sd2-base, sdxl, unet-tiny, sdxl-tiny)
// RUN: not sdgen --preset=unet-tiny --pooled-dim=8 -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNET-POOLED
// UNET-POOLED: sdgen: error: --pooled-dim applies to Flux and SDXL (their pooled text vector)
// RUN: not sdgen --preset=unet-tiny --layers-per-block=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=PER-BLOCK
// PER-BLOCK: sdgen: error: --layers-per-block 0: give 1 to 16
