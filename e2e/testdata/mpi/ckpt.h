/*
 * ckpt.h: what the MPI checkpoint programs of e2e/mpiio_test.go share: the
 * content every rank writes and checks, progress lines, the verdict, the
 * MPI-IO hints.
 *
 * The content is a function of the file offset alone (a splitmix64 stream
 * keyed by the offset), so a reader with any number of ranks knows every
 * byte of the file without knowing who wrote it, and a block in the wrong
 * place, a hole, or zeros where another node's bytes belong are told apart
 * from the right bytes.
 */
#ifndef SCRFS_CKPT_H
#define SCRFS_CKPT_H

#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int ckpt_rank, ckpt_size;

/* ckpt_word is the 8 bytes at offset 8*i of a checkpoint. */
static inline uint64_t ckpt_word(uint64_t i)
{
	uint64_t z = i + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ckpt_byte is the byte at offset off of a checkpoint. */
static inline unsigned char ckpt_byte(uint64_t off)
{
	return (unsigned char)(ckpt_word(off / 8) >> (8 * (off % 8)));
}

/* ckpt_fill writes the checkpoint's bytes [off, off+n) into buf. */
static inline void ckpt_fill(unsigned char *buf, uint64_t off, size_t n)
{
	for (size_t k = 0; k < n; k++)
		buf[k] = ckpt_byte(off + k);
}

/*
 * ckpt_step says what this rank does next, before it does it: a job that
 * hangs is then seen hanging in the call its last line names. Every line
 * is flushed at once, so mpirun forwards it even if the rank never returns.
 */
static inline void ckpt_step(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("rank %d: ", ckpt_rank);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

/*
 * ckpt_die reports a failed call (with MPI's message for err, unless it
 * is MPI_SUCCESS) and aborts the whole job: the other ranks may be waiting
 * for this one in a collective call, and would wait forever.
 */
static inline void ckpt_die(const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING] = "";
	int len = 0;
	if (err != MPI_SUCCESS)
		MPI_Error_string(err, msg, &len);
	printf("rank %d: FAILED: %s%s%s\n", ckpt_rank, what, len > 0 ? ": " : "", msg);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* ckpt_check fails the job on any MPI error. */
static inline void ckpt_check(int err, const char *what)
{
	if (err != MPI_SUCCESS)
		ckpt_die(what, err);
}

/*
 * ckpt_init starts MPI and this rank; every line it prints is flushed at
 * once (ckpt_step).
 */
static inline void ckpt_init(int *argc, char ***argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &ckpt_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ckpt_size);
}

/*
 * ckpt_make_dir: rank 0 makes every missing directory above path, as rank 0
 * of an application makes its checkpoint directory (mkdir -p), and the
 * other ranks wait for it.
 */
static inline void ckpt_make_dir(const char *path)
{
	char buf[4096];
	if (ckpt_rank == 0) {
		ckpt_step("mkdir -p the directory of %s", path);
		snprintf(buf, sizeof buf, "%s", path);
		for (char *p = buf + 1; *p; p++) {
			if (*p != '/')
				continue;
			*p = 0;
			if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
				printf("rank %d: FAILED: mkdir %s: %s\n", ckpt_rank, buf, strerror(errno));
				fflush(stdout);
				MPI_Abort(MPI_COMM_WORLD, 2);
			}
			*p = '/';
		}
	}
	ckpt_step("MPI_Barrier after the mkdir");
	MPI_Barrier(MPI_COMM_WORLD);
}

/*
 * ckpt_info is the MPI-IO hints every program opens its file with.
 *
 * One host runs every rank, so ROMIO would take them for one node and pick
 * a single collective-buffering aggregator (rank 0) to write the whole
 * file: cb_config_list "*:*" and cb_nodes = ranks make every rank an
 * aggregator, as one rank per node on a cluster is, and each then writes
 * its part of the file through its own node's mount.
 *
 * Data sieving of independent writes reads a whole block, patches this
 * rank's pieces into it and writes the block back under an fcntl lock; on
 * node-local fragments of a shared file it would write back zeros over
 * another node's bytes (issue 29), so it is off unless ds_write says
 * otherwise ("enable" to see what the file system does with it).
 */
static inline MPI_Info ckpt_info(const char *ds_write)
{
	MPI_Info info;
	char n[16];
	snprintf(n, sizeof n, "%d", ckpt_size);
	MPI_Info_create(&info);
	MPI_Info_set(info, "cb_config_list", "*:*");
	MPI_Info_set(info, "cb_nodes", n);
	MPI_Info_set(info, "romio_ds_write", ds_write ? ds_write : "disable");
	return info;
}

/*
 * ckpt_require_hint fails the job unless the open file fh took hint key
 * with value want: a hint the MPI-IO layer ignored (OMPIO takes none of
 * ROMIO's) would make the test test something else than it says.
 */
static inline void ckpt_require_hint(MPI_File fh, const char *key, const char *want)
{
	MPI_Info info;
	char got[MPI_MAX_INFO_VAL + 1] = "";
	int flag = 0;
	ckpt_check(MPI_File_get_info(fh, &info), "MPI_File_get_info");
	MPI_Info_get(info, key, MPI_MAX_INFO_VAL, got, &flag);
	MPI_Info_free(&info);
	if (!flag || strcmp(got, want) != 0) {
		printf("rank %d: FAILED: hint %s is \"%s\" in the open file, want \"%s\" (is ROMIO the MPI-IO layer? mpirun --mca io romio321)\n",
		       ckpt_rank, key, flag ? got : "(unset)", want);
		fflush(stdout);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

/* ckpt_mismatch collects the wrong bytes one rank read. */
struct ckpt_mismatch {
	uint64_t bad;        /* wrong bytes */
	uint64_t zeros;      /* of them, read as zero */
	uint64_t first, end; /* the first run of wrong words, [first, end) in bytes */
	uint64_t last;       /* the last wrong word seen */
	int runs;            /* runs of wrong words */
};

/*
 * ckpt_compare checks n bytes read at off against the checkpoint's and
 * adds what is wrong to m. Runs are counted in 8-byte words, so a wrong
 * byte that equals the right one by chance does not split a run.
 */
static inline void ckpt_compare(struct ckpt_mismatch *m, const unsigned char *buf, uint64_t off, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		uint64_t pos = off + k, word = pos / 8;
		if (buf[k] == ckpt_byte(pos))
			continue;
		m->bad++;
		if (buf[k] == 0)
			m->zeros++;
		if (m->runs == 0) {
			m->runs = 1;
			m->first = pos;
		} else if (word > m->last + 1) {
			m->runs++;
		}
		if (m->runs == 1)
			m->end = pos + 1;
		m->last = word;
	}
}

/*
 * ckpt_verdict prints each rank's finding, then rank 0's verdict for the
 * job, and returns the exit status of every rank: 0 when no rank found a
 * wrong byte and none had other problems (a wrong size, say).
 */
static inline int ckpt_verdict(const char *what, const struct ckpt_mismatch *m, uint64_t checked, int problems)
{
	uint64_t bad = m->bad, all_bad = 0;
	int all_problems = 0;
	if (m->bad > 0)
		printf("rank %d: MISMATCH in %s: %llu of %llu bytes wrong (%llu of them zeros), %d run(s), the first [%llu, %llu)\n",
		       ckpt_rank, what, (unsigned long long)m->bad, (unsigned long long)checked,
		       (unsigned long long)m->zeros, m->runs, (unsigned long long)m->first, (unsigned long long)m->end);
	else if (problems == 0)
		printf("rank %d: %s: %llu bytes right\n", ckpt_rank, what, (unsigned long long)checked);
	fflush(stdout);
	MPI_Allreduce(&bad, &all_bad, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(&problems, &all_problems, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (ckpt_rank == 0) {
		if (all_bad == 0 && all_problems == 0)
			printf("VERDICT ok: %s on %d ranks\n", what, ckpt_size);
		else
			printf("VERDICT FAILED: %s on %d ranks: %llu wrong bytes, %d other problems\n", what, ckpt_size,
			       (unsigned long long)all_bad, all_problems);
		fflush(stdout);
	}
	return all_bad == 0 && all_problems == 0 ? 0 : 1;
}

/*
 * ckpt_wrote ends a write: each rank says what it wrote, and rank 0 gives
 * the job's verdict once every rank has (a rank that failed aborted the
 * job before this).
 */
static inline int ckpt_wrote(const char *what, uint64_t bytes)
{
	printf("rank %d: wrote %llu bytes\n", ckpt_rank, (unsigned long long)bytes);
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);
	if (ckpt_rank == 0) {
		printf("VERDICT ok: %s on %d ranks\n", what, ckpt_size);
		fflush(stdout);
	}
	return 0;
}

#endif
