/*
 * ckpt_h5: a parallel HDF5 checkpoint, one file with one dataset that every
 * rank writes a hyperslab of, collectively, through MPI-IO (as the test runs
 * it: each rank in its own node's mount namespace, rankns.sh).
 *
 *   ckpt_h5 write PATH ROWS
 *       rank 0 makes PATH's directory; the ranks create PATH and the dataset
 *       /step/weights, ranks*ROWS rows of 512 64-bit words, and rank r writes
 *       rows [r*ROWS, (r+1)*ROWS) in one collective H5Dwrite.
 *   ckpt_h5 read PATH ALL_ROWS
 *       every rank opens PATH, checks the dataset's shape and reads all of
 *       it, checking every word.
 *
 * Word i of the dataset is ckpt.h's ckpt_word(i), so a read on any number of
 * ranks checks a file written on any other. The file's bytes do not depend
 * on when it was written (no object times), so the same program on one
 * plain directory gives the reference file, byte for byte.
 */
#include <hdf5.h>

#include "ckpt.h"

#define COLS 512
#define DATASET "/step/weights"

/* h5fail: HDF5 printed its error stack (HDF5-DIAG) to stderr already. */
static void h5fail(const char *what)
{
	char msg[256];
	snprintf(msg, sizeof msg, "%s (the HDF5-DIAG lines say why)", what);
	ckpt_die(msg, MPI_SUCCESS);
}

static void h5check(herr_t err, const char *what)
{
	if (err < 0)
		h5fail(what);
}

static hid_t h5id(hid_t id, const char *what)
{
	if (id < 0)
		h5fail(what);
	return id;
}

/* access is the file access list: MPI-IO with ckpt.h's hints. */
static hid_t access_list(MPI_Info info)
{
	hid_t fapl = h5id(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate(access)");
	h5check(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, info), "H5Pset_fapl_mpio");
	return fapl;
}

static int write_file(const char *path, hsize_t rows)
{
	hsize_t dims[2] = {rows * ckpt_size, COLS}, start[2] = {rows * ckpt_rank, 0}, count[2] = {rows, COLS};
	uint64_t *buf = malloc(rows * COLS * sizeof *buf);
	for (hsize_t k = 0; k < rows * COLS; k++)
		buf[k] = ckpt_word(start[0] * COLS + k);
	MPI_Info info = ckpt_info(NULL);
	ckpt_make_dir(path);

	/* No object times anywhere: the file's bytes are then a function of
	 * what was written, comparable with the reference run's. */
	hid_t fcpl = h5id(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate(file create)");
	h5check(H5Pset_obj_track_times(fcpl, 0), "H5Pset_obj_track_times(file)");
	hid_t fapl = access_list(info);
	ckpt_step("H5Fcreate(%s)", path);
	hid_t file = h5id(H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl), "H5Fcreate");
	hid_t gcpl = h5id(H5Pcreate(H5P_GROUP_CREATE), "H5Pcreate(group)");
	h5check(H5Pset_obj_track_times(gcpl, 0), "H5Pset_obj_track_times(group)");
	hid_t group = h5id(H5Gcreate2(file, "/step", H5P_DEFAULT, gcpl, H5P_DEFAULT), "H5Gcreate2");

	/* No fill values: each element is written once, by the rank whose
	 * hyperslab holds it. */
	hid_t dcpl = h5id(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate(dataset)");
	h5check(H5Pset_obj_track_times(dcpl, 0), "H5Pset_obj_track_times(dataset)");
	h5check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
	hid_t space = h5id(H5Screate_simple(2, dims, NULL), "H5Screate_simple");
	ckpt_step("H5Dcreate2(%s, %llu x %d)", DATASET, (unsigned long long)dims[0], COLS);
	hid_t dset = h5id(H5Dcreate2(file, DATASET, H5T_STD_U64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), "H5Dcreate2");

	hid_t mem = h5id(H5Screate_simple(2, count, NULL), "H5Screate_simple(memory)");
	h5check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL), "H5Sselect_hyperslab");
	hid_t dxpl = h5id(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate(transfer)");
	h5check(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
	ckpt_step("H5Dwrite(rows [%llu, %llu), collective)", (unsigned long long)start[0], (unsigned long long)(start[0] + rows));
	h5check(H5Dwrite(dset, H5T_NATIVE_UINT64, mem, space, dxpl, buf), "H5Dwrite");

	ckpt_step("H5Fclose");
	H5Pclose(dxpl);
	H5Sclose(mem);
	H5Dclose(dset);
	H5Sclose(space);
	H5Pclose(dcpl);
	H5Gclose(group);
	H5Pclose(gcpl);
	h5check(H5Fclose(file), "H5Fclose");
	H5Pclose(fapl);
	H5Pclose(fcpl);
	MPI_Info_free(&info);
	free(buf);
	return ckpt_wrote("parallel HDF5 collective write", rows * COLS * sizeof *buf);
}

static int read_file(const char *path, hsize_t all_rows)
{
	struct ckpt_mismatch m = {0};
	int problems = 0;
	hsize_t dims[2] = {0, 0};
	MPI_Info info = ckpt_info(NULL);
	hid_t fapl = access_list(info);
	ckpt_step("H5Fopen(%s, read-only)", path);
	hid_t file = h5id(H5Fopen(path, H5F_ACC_RDONLY, fapl), "H5Fopen");
	ckpt_step("H5Dopen2(%s)", DATASET);
	hid_t dset = h5id(H5Dopen2(file, DATASET, H5P_DEFAULT), "H5Dopen2");
	hid_t space = h5id(H5Dget_space(dset), "H5Dget_space");
	if (H5Sget_simple_extent_ndims(space) != 2 || H5Sget_simple_extent_dims(space, dims, NULL) != 2 ||
	    dims[0] != all_rows || dims[1] != COLS) {
		printf("rank %d: WRONG SHAPE: %s is %llu x %llu, want %llu x %d\n", ckpt_rank, DATASET,
		       (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)all_rows, COLS);
		problems++;
	} else {
		uint64_t *buf = malloc(all_rows * COLS * sizeof *buf);
		ckpt_step("H5Dread(all %llu rows)", (unsigned long long)all_rows);
		h5check(H5Dread(dset, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), "H5Dread");
		/* The words as stored (little-endian), so a wrong byte is counted
		 * where it is. */
		ckpt_compare(&m, (const unsigned char *)buf, 0, all_rows * COLS * sizeof *buf);
		free(buf);
	}
	ckpt_step("H5Fclose");
	H5Sclose(space);
	H5Dclose(dset);
	h5check(H5Fclose(file), "H5Fclose");
	H5Pclose(fapl);
	MPI_Info_free(&info);
	return ckpt_verdict("HDF5 read back", &m, all_rows * COLS * sizeof(uint64_t), problems);
}

int main(int argc, char **argv)
{
	int rc = 2;
	ckpt_init(&argc, &argv);
	if (argc == 4 && strcmp(argv[1], "write") == 0)
		rc = write_file(argv[2], strtoull(argv[3], NULL, 10));
	else if (argc == 4 && strcmp(argv[1], "read") == 0)
		rc = read_file(argv[2], strtoull(argv[3], NULL, 10));
	else if (ckpt_rank == 0)
		fprintf(stderr, "usage: ckpt_h5 write PATH ROWS | read PATH ALL_ROWS\n");
	MPI_Finalize();
	return rc;
}
