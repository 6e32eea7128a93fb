#!/usr/bin/env python3
"""Reads the system calls one-client-cycle.sh recorded and prints, per step of one client's
operation, the median, mean and 90th percentile in microseconds.

A cycle starts when the primary enters fdatasync and ends when it enters the next one; its
steps are marked by the first matching call after the mark before (the primary's reply is
its first sendto after the fsync; the replica stream's send follows it).

    one-client-cycle.py CALLS PIDS
"""
import collections
import re
import sys

MARKS = [
    ('P', 'enter', 'fdatasync'),
    ('P', 'exit', 'fdatasync'),
    ('P', 'enter', 'sendto'),
    ('P', 'exit', 'sendto'),
    ('C', 'exit', 'recvfrom'),
    ('C', 'enter', 'sendto'),
    ('C', 'exit', 'sendto'),
    ('P', 'exit', 'recvfrom'),
    ('P', 'enter', 'fdatasync'),
]
STEPS = [
    'primary: fdatasync',
    'primary: fsync done -> reply sendto',
    'primary: reply sendto',
    'reply sent -> client recvfrom returns',
    'client: reply read -> next command sendto',
    'client: sendto',
    'command sent -> primary recvfrom returns',
    'primary: command read -> fdatasync',
]
LINE = re.compile(r'^\s*\S.*?\s+(\d+)/\d+\s+\[(\d+)\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+):')


def main(calls, pids):
    role = {pid: name for name, pid in (kv.split('=') for kv in open(pids).read().split())}
    events = []
    for line in open(calls):
        m = LINE.match(line)
        if m:
            pid, cpu, t, kind, call = m.groups()
            events.append((float(t) * 1e6, role.get(pid, '?'), int(cpu), kind, call))
    events.sort()
    cycles = []
    i = 0
    while True:
        while i < len(events) and (events[i][1],) + events[i][3:] != MARKS[0]:
            i += 1
        if i >= len(events):
            break
        marks = [events[i]]
        j = i + 1
        for mark in MARKS[1:]:
            while j < len(events) and (events[j][1],) + events[j][3:] != mark:
                j += 1
            if j >= len(events):
                break
            marks.append(events[j])
            j += 1
        if len(marks) < len(MARKS):
            break
        cycles.append(marks)
        i = j - 1  # the next cycle starts at this one's last fdatasync
    if not cycles:
        sys.exit('no whole cycle in the recording')

    def row(name, values):
        values = sorted(values)
        n = len(values)
        print(f'| {name} | {values[n // 2]:.0f} | {sum(values) / n:.1f} | {values[n * 9 // 10]:.0f} |')

    print(f'\n{len(cycles)} cycles\n')
    print('| step | p50 µs | mean µs | p90 µs |\n|---|---:|---:|---:|')
    for k, name in enumerate(STEPS):
        row(name, [c[k + 1][0] - c[k][0] for c in cycles])
    row('whole cycle', [c[-1][0] - c[0][0] for c in cycles])
    cpus = lambda k: dict(collections.Counter(c[k][2] for c in cycles))
    print(f'\nCPUs: the primary leaves fdatasync on {cpus(1)}, the client reads the reply on {cpus(4)}')


if __name__ == '__main__':
    main(*sys.argv[1:3])
