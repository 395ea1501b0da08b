/*
 * ckpt_mpiio: one shared checkpoint file (N-1) written and read back with
 * MPI-IO, as HPC codes checkpoint. The test runs it under mpirun, each rank
 * in its own node's mount namespace (rankns.sh), so every rank opens the
 * same path and reaches its own node's mount.
 *
 *   ckpt_mpiio write-collective PATH BLOCK
 *       rank 0 makes PATH's directory, then every rank opens PATH
 *       (MPI_MODE_CREATE|MPI_MODE_WRONLY) and writes BLOCK bytes at
 *       rank*BLOCK with one MPI_File_write_at_all: a file of ranks*BLOCK.
 *   ckpt_mpiio write-strided PATH PIECE PIECES DS_WRITE
 *       independent noncontiguous writes: through a file view, each rank
 *       writes PIECES pieces of PIECE bytes round-robin (piece k of rank r at
 *       (k*ranks + r)*PIECE) with one MPI_File_write_at; DS_WRITE is the
 *       romio_ds_write hint ("disable" avoids data sieving).
 *   ckpt_mpiio read PATH SIZE
 *       every rank reads the whole file and checks its size and every byte.
 *
 * The bytes are ckpt.h's, a function of the offset, so a read on any number
 * of ranks checks a file written on any other. It prints a line per step
 * and rank, and rank 0 a VERDICT line; it exits non-zero on any failed call
 * or wrong byte.
 */
#include "ckpt.h"

static MPI_File open_file(const char *path, int amode, MPI_Info info)
{
	MPI_File fh;
	ckpt_step("MPI_File_open(%s, %s)", path, amode & MPI_MODE_CREATE ? "CREATE|WRONLY" : amode & MPI_MODE_WRONLY ? "WRONLY" : "RDONLY");
	ckpt_check(MPI_File_open(MPI_COMM_WORLD, path, amode, info, &fh), "MPI_File_open");
	return fh;
}

static void close_file(MPI_File *fh)
{
	ckpt_step("MPI_File_close");
	ckpt_check(MPI_File_close(fh), "MPI_File_close");
}

static int write_collective(const char *path, uint64_t block)
{
	uint64_t off = (uint64_t)ckpt_rank * block;
	unsigned char *buf = malloc(block);
	char n[16];
	MPI_Info info = ckpt_info(NULL);
	ckpt_fill(buf, off, block);
	ckpt_make_dir(path);
	MPI_File fh = open_file(path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info);
	/* ROMIO reports the aggregators it took: every rank, see ckpt_info. */
	snprintf(n, sizeof n, "%d", ckpt_size);
	ckpt_require_hint(fh, "cb_nodes", n);
	ckpt_step("MPI_File_write_at_all([%llu, %llu))", (unsigned long long)off, (unsigned long long)(off + block));
	MPI_Status st;
	ckpt_check(MPI_File_write_at_all(fh, (MPI_Offset)off, buf, (int)block, MPI_BYTE, &st), "MPI_File_write_at_all");
	close_file(&fh);
	MPI_Info_free(&info);
	free(buf);
	return ckpt_wrote("collective N-1 write", block);
}

static int write_strided(const char *path, int piece, int pieces, const char *ds_write)
{
	uint64_t mine = (uint64_t)piece * pieces;
	unsigned char *buf = malloc(mine);
	MPI_Info info = ckpt_info(ds_write);
	MPI_Datatype strided;
	for (int k = 0; k < pieces; k++)
		ckpt_fill(buf + (uint64_t)k * piece, ((uint64_t)k * ckpt_size + ckpt_rank) * piece, piece);
	ckpt_make_dir(path);
	MPI_File fh = open_file(path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info);
	ckpt_require_hint(fh, "romio_ds_write", ds_write);
	/* The rank's pieces as one noncontiguous view: what data sieving acts on. */
	MPI_Type_vector(pieces, piece, piece * ckpt_size, MPI_BYTE, &strided);
	MPI_Type_commit(&strided);
	ckpt_step("MPI_File_set_view(displacement %d, %d pieces of %d bytes every %d)", ckpt_rank * piece, pieces, piece, piece * ckpt_size);
	ckpt_check(MPI_File_set_view(fh, (MPI_Offset)ckpt_rank * piece, MPI_BYTE, strided, "native", info), "MPI_File_set_view");
	ckpt_step("MPI_File_write_at(%llu bytes, independent, romio_ds_write=%s)", (unsigned long long)mine, ds_write);
	MPI_Status st;
	ckpt_check(MPI_File_write_at(fh, 0, buf, (int)mine, MPI_BYTE, &st), "MPI_File_write_at");
	close_file(&fh);
	MPI_Type_free(&strided);
	MPI_Info_free(&info);
	free(buf);
	return ckpt_wrote("independent strided write", mine);
}

static int read_all(const char *path, uint64_t size)
{
	const uint64_t chunk = 4 << 20;
	unsigned char *buf = malloc(chunk);
	struct ckpt_mismatch m = {0};
	int problems = 0;
	MPI_Offset got;
	MPI_Info info = ckpt_info(NULL);
	MPI_File fh = open_file(path, MPI_MODE_RDONLY, info);
	ckpt_check(MPI_File_get_size(fh, &got), "MPI_File_get_size");
	if ((uint64_t)got != size) {
		printf("rank %d: WRONG SIZE: %s is %lld bytes, want %llu\n", ckpt_rank, path, (long long)got, (unsigned long long)size);
		problems++;
	}
	uint64_t end = (uint64_t)got < size ? (uint64_t)got : size;
	ckpt_step("MPI_File_read_at of [0, %llu)", (unsigned long long)end);
	for (uint64_t off = 0; off < end; off += chunk) {
		int n = (int)(end - off < chunk ? end - off : chunk), count;
		MPI_Status st;
		ckpt_check(MPI_File_read_at(fh, (MPI_Offset)off, buf, n, MPI_BYTE, &st), "MPI_File_read_at");
		MPI_Get_count(&st, MPI_BYTE, &count);
		if (count != n) {
			printf("rank %d: SHORT READ: %d bytes at %llu, want %d\n", ckpt_rank, count, (unsigned long long)off, n);
			problems++;
			break;
		}
		ckpt_compare(&m, buf, off, n);
	}
	close_file(&fh);
	MPI_Info_free(&info);
	free(buf);
	return ckpt_verdict("read back", &m, end, problems);
}

static int usage(void)
{
	if (ckpt_rank == 0)
		fprintf(stderr, "usage: ckpt_mpiio write-collective PATH BLOCK | write-strided PATH PIECE PIECES DS_WRITE | read PATH SIZE\n");
	return 2;
}

int main(int argc, char **argv)
{
	int rc;
	ckpt_init(&argc, &argv);
	if (argc == 4 && strcmp(argv[1], "write-collective") == 0)
		rc = write_collective(argv[2], strtoull(argv[3], NULL, 10));
	else if (argc == 6 && strcmp(argv[1], "write-strided") == 0)
		rc = write_strided(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
	else if (argc == 4 && strcmp(argv[1], "read") == 0)
		rc = read_all(argv[2], strtoull(argv[3], NULL, 10));
	else
		rc = usage();
	MPI_Finalize();
	return rc;
}
