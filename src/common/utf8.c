#include "utf8.h"

size_t utf8_sequence_length(const uint8_t *p, size_t available)
{
    if (available == 0)
        return 0;
    uint8_t c = p[0], low = 0x80, high = 0xBF;
    size_t length;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        length = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        length = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        length = 4;
    else
        return 0;
    if (c == 0xE0)
        low = 0xA0;
    else if (c == 0xED)
        high = 0x9F; /* no UTF-16 surrogates */
    else if (c == 0xF0)
        low = 0x90;
    else if (c == 0xF4)
        high = 0x8F; /* nothing above U+10FFFF */
    if (available < length || p[1] < low || p[1] > high)
        return 0;
    for (size_t i = 2; i < length; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return length;
}
