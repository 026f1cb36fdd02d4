"""What the convolution forward does with each image's result
(:mod:`ember.ops.conv_forward`), as C for its source: bias and ReLU in place
(``finish``); max pooling of a result laid out channels last, each window's max one
vector across the channels, written out channels first (``pool``); and an unpooled result
laid out channels last, transposed to channels first with its bias and ReLU
(``unpack``). The 8x8 transposes in registers come from the GEMM's source
(``transpose8_REAL``, where ``GEMM_SHUFFLES``).
"""

EPILOGUES = r"""
/* channels [o0, o1) of one image's output y (O x OH*OW): + bias, relu */
static void finish(const conv_t *q, REAL *y, int64_t o0, int64_t o1)
{
    const REAL *bias = (const REAL *)q->bias;
    const int64_t L = q->OH * q->OW;
    for (int64_t o = o0; o < o1; o++) {
        REAL *r = y + o * L;
        const REAL b = bias ? bias[o] : (REAL)0;
        if (q->relu) {
            #pragma omp simd
            for (int64_t i = 0; i < L; i++) { const REAL v = r[i] + b; r[i] = v < 0 ? 0 : v; }
        } else if (bias) {
            #pragma omp simd
            for (int64_t i = 0; i < L; i++) r[i] += b;
        }
    }
}

/* window j (counted from pooled row ph0) of channel o: from m (and at) channels last
   into out (and index) channels first, as pool finishes it */
static inline void write_window(const conv_t *q, const REAL *m, const REAL *at, REAL *out,
                                int64_t *index, const REAL *bias, REAL floor, int64_t PL,
                                int64_t first, int64_t ph0, int64_t j, int64_t o)
{
    const REAL v = m[j * q->O + o];
    if (index) {
        out[o * PL + first + j] = v;
        index[o * PL + first + j] = (ph0 + j / q->POW) * q->PSH * q->OW +
                                    j % q->POW * q->PSW + (int64_t)at[j * q->O + o];
    } else {
        const REAL s = v + (bias ? bias[o] : (REAL)0);
        out[o * PL + first + j] = s < floor ? floor : s;
    }
}

/* channels [o0, o1) of one image's result yt, channels last (OH*OW x O): max over each
   pooling window, + bias, relu, into out (O x POH*POW). Each window's max runs across the
   channels (one vector of them), into m (POH*POW x O, channels last); m is then written
   out channel by channel (contiguous stores, not one store per channel and window). NaN
   wins a window, as in the unfused pooling.
   Without indices, bias and relu apply to the pooled values only: max commutes with
   both (they are monotone). With indices (index: the image's (O x POH*POW) plane of
   flat positions in OH*OW), every value gets its bias and relu first, so that the
   first of equal values wins as in the unfused pooling; at (as m) keeps each winner's
   offset from its window's first position, in REAL (exact: a plane holds fewer than
   2^24 values), the same vector width as the values. */
static void pool(const conv_t *q, const REAL *restrict yt, int64_t yw, int64_t ph0,
                 int64_t ph1, REAL *restrict out, int64_t *restrict index, REAL *restrict m,
                 REAL *restrict at, int64_t o0, int64_t o1)
{
    const REAL *bias = (const REAL *)q->bias;  /* (never NULL with indices) */
    const int64_t O = q->O, OW = q->OW;
    const int relu = (int)q->relu;
    const REAL floor = relu ? (REAL)0 : -(REAL)INFINITY;  /* NaN stays NaN */
    for (int64_t ph = ph0; ph < ph1; ph++)
        for (int64_t pw = 0; pw < q->POW; pw++) {
            const REAL *first = yt + ((ph - ph0) * q->PSH * yw + pw * q->PSW) * O;
            REAL *restrict mw = m + ((ph - ph0) * q->POW + pw) * O;
            REAL *restrict aw = at + ((ph - ph0) * q->POW + pw) * O;
            /* the usual 2 x 2 window in one pass: its taps after the first, in order */
            const int64_t taps[3] = {O, yw * O, (yw + 1) * O};
            const REAL offsets[3] = {1, (REAL)OW, (REAL)(OW + 1)};
            const int two_by_two = q->PKH == 2 && q->PKW == 2;
            if (!index && two_by_two) {
                #pragma omp simd
                for (int64_t o = o0; o < o1; o++) {
                    REAL best = first[o];
                    for (int s = 0; s < 3; s++) {
                        const REAL v = first[taps[s] + o];
                        best = (v > best) | (v != v) ? v : best;
                    }
                    mw[o] = best;
                }
                continue;
            }
            if (!index) {
                #pragma omp simd
                for (int64_t o = o0; o < o1; o++)
                    mw[o] = first[o];
                for (int64_t i = 0; i < q->PKH; i++)
                    for (int64_t j = i ? 0 : 1; j < q->PKW; j++) {
                        const REAL *restrict tap = first + (i * yw + j) * O;
                        #pragma omp simd
                        for (int64_t o = o0; o < o1; o++) {
                            const REAL v = tap[o];
                            mw[o] = (v > mw[o]) | (v != v) ? v : mw[o];
                        }
                    }
                continue;
            }
            if (two_by_two) {
                #pragma omp simd
                for (int64_t o = o0; o < o1; o++) {
                    const REAL b = bias[o];
                    REAL best = first[o] + b, where = 0;
                    best = best < floor ? floor : best;
                    for (int s = 0; s < 3; s++) {
                        REAL v = first[taps[s] + o] + b;
                        v = v < floor ? floor : v;
                        const int take = (v > best) | (v != v);
                        best = take ? v : best;
                        where = take ? offsets[s] : where;
                    }
                    mw[o] = best;
                    aw[o] = where;
                }
                continue;
            }
            #pragma omp simd
            for (int64_t o = o0; o < o1; o++) {
                const REAL v = first[o] + bias[o];
                mw[o] = v < floor ? floor : v;
                aw[o] = 0;
            }
            for (int64_t i = 0; i < q->PKH; i++)
                for (int64_t j = i ? 0 : 1; j < q->PKW; j++) {
                    const REAL *restrict tap = first + (i * yw + j) * O;
                    const REAL offset = (REAL)(i * OW + j);
                    #pragma omp simd
                    for (int64_t o = o0; o < o1; o++) {
                        REAL v = tap[o] + bias[o];
                        v = v < floor ? floor : v;
                        const int take = (v > mw[o]) | (v != v);
                        mw[o] = take ? v : mw[o];
                        aw[o] = take ? offset : aw[o];
                    }
                }
        }
    const int64_t PL = q->POH * q->POW, first = ph0 * q->POW, count = (ph1 - ph0) * q->POW;
    int64_t p = 0;
#if GEMM_SHUFFLES
    /* 8 windows x 8 channels at a time, transposed in registers: m's channels-last rows
       become 8 contiguous stores per channel */
    for (; p + 8 <= count; p += 8) {
        int64_t base[8];
        for (int i = 0; i < 8; i++)
            base[i] = (ph0 + (p + i) / q->POW) * q->PSH * OW + (p + i) % q->POW * q->PSW;
        int64_t o = o0;
        for (; o + 8 <= o1; o += 8) {
            v8REAL a[8], t[8], u[8], w[8];
            for (int i = 0; i < 8; i++)
                memcpy(&a[i], m + (p + i) * O + o, sizeof a[i]);
            transpose8_REAL(a, t);
            if (index) {
                for (int i = 0; i < 8; i++)
                    memcpy(&u[i], at + (p + i) * O + o, sizeof u[i]);
                transpose8_REAL(u, w);
            }
            for (int i = 0; i < 8; i++) {
                REAL v[8];
                memcpy(v, &t[i], sizeof v);
                REAL *dst = out + (o + i) * PL + first + p;
                if (index) {
                    REAL where[8];
                    memcpy(where, &w[i], sizeof where);
                    int64_t *idst = index + (o + i) * PL + first + p;
                    for (int j = 0; j < 8; j++) {
                        dst[j] = v[j];
                        idst[j] = base[j] + (int64_t)where[j];
                    }
                } else {
                    const REAL b = bias ? bias[o + i] : (REAL)0;
                    #pragma omp simd
                    for (int j = 0; j < 8; j++) {
                        const REAL s = v[j] + b;
                        dst[j] = s < floor ? floor : s;
                    }
                }
            }
        }
        for (; o < o1; o++)
            for (int64_t j = p; j < p + 8; j++)
                write_window(q, m, at, out, index, bias, floor, PL, first, ph0, j, o);
    }
#endif
    for (int64_t o = o0; o < o1; o++)
        for (int64_t j = p; j < count; j++)
            write_window(q, m, at, out, index, bias, floor, PL, first, ph0, j, o);
}

/* channels last yt (grid rows WP apart, from row r0) + bias, relu, into rows [r0, r1)
   and channels [c0, c1) of one image's output y (O x OH*OW): 8 positions x 8 channels
   at a time, transposed in registers, the rest one by one */
static void unpack(const conv_t *q, const REAL *yt, int64_t r0, int64_t r1, int64_t c0,
                   int64_t c1, REAL *y)
{
    const REAL *bias = (const REAL *)q->bias;
    const int64_t O = q->O, OW = q->OW, WP = q->WP, L = q->OH * OW;
    const int relu = (int)q->relu;
    for (int64_t r = r0; r < r1; r++) {
        const REAL *row = yt + (r - r0) * WP * O;  /* position j, channel o at j * O + o */
        REAL *dst = y + r * OW;                   /* at o * L + j */
        int64_t j0 = 0;
#if GEMM_SHUFFLES
        for (; j0 + 8 <= OW; j0 += 8) {
            int64_t o0 = c0;
            for (; o0 + 8 <= c1; o0 += 8) {
                v8REAL a[8], t[8];
                for (int i = 0; i < 8; i++)
                    memcpy(&a[i], row + (j0 + i) * O + o0, sizeof a[i]);
                transpose8_REAL(a, t);
                for (int i = 0; i < 8; i++) {
                    REAL v[8], *out = dst + (o0 + i) * L + j0;
                    const REAL b = bias ? bias[o0 + i] : (REAL)0;
                    memcpy(v, &t[i], sizeof v);
                    #pragma omp simd
                    for (int jj = 0; jj < 8; jj++) {
                        const REAL s = v[jj] + b;
                        out[jj] = relu && s < 0 ? 0 : s;
                    }
                }
            }
            for (; o0 < c1; o0++)
                for (int64_t j = j0; j < j0 + 8; j++) {
                    const REAL s = row[j * O + o0] + (bias ? bias[o0] : (REAL)0);
                    dst[o0 * L + j] = relu && s < 0 ? 0 : s;
                }
        }
#endif
        for (int64_t o = c0; o < c1; o++)
            for (int64_t j = j0; j < OW; j++) {
                const REAL s = row[j * O + o] + (bias ? bias[o] : (REAL)0);
                dst[o * L + j] = relu && s < 0 ? 0 : s;
            }
    }
}
"""

__all__ = ["EPILOGUES"]
